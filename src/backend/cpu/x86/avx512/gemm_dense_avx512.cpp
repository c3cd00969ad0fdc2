// AVX-512 dense GEMMs: bf16 x bf16 -> bf16 (vdpbf16ps: products exact, fp32 sums), fp32 x bf16 -> fp32 and
// fp32 x fp32 -> fp32 (FMA). Few activation rows (decode) stream each weight row once with k in the
// lanes; many rows first transpose a 16-row panel of the weight (row r in lane r, L2-resident) and run
// tiles of 8 activation rows over it with the accumulators in registers.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// From this many activation rows on, the panel kernel wins over streaming rows with k in the lanes.
constexpr int64_t kPanelMinRows = 16;

// ---- weight formats: load 16 (or a masked tail of) columns of one row as fp32 / 32 columns as bf16 ----

struct Bf16W {
    static __m512 load16(const void* row, int64_t col, __mmask16 m) {
        const auto* p = static_cast<const uint16_t*>(row) + col;
        return from_bf16(_mm256_maskz_loadu_epi16(m, p));
    }
};
struct F32W {
    static __m512 load16(const void* row, int64_t col, __mmask16 m) {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + col);
    }
};

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

// ---- GEMV: k in the lanes, 4 weight rows x up to 4 activation rows per pass ---------------------------
// The 4 rows of a pass come from the 4 quarters of the task's rows: rows read side by side from adjacent
// addresses (k * 2 bytes apart) measured ~30% below the read bandwidth, rows >= 4 rows apart within 5-10%.

// bf16 x and weights, 32 columns per step.
struct Bf16Step {
    static constexpr int kCols = 32;
    static __m512i load_x(const void* x, int64_t col, int64_t k) {
        return _mm512_maskz_loadu_epi16(mask(col, k), static_cast<const uint16_t*>(x) + col);
    }
    static __m512 madd(__m512 acc, const void* w, __m512i x, int64_t col, int64_t k) {
        const __m512i wv = _mm512_maskz_loadu_epi16(mask(col, k), static_cast<const uint16_t*>(w) + col);
        return _mm512_dpbf16_ps(acc, (__m512bh)wv, (__m512bh)x);
    }
    static __mmask32 mask(int64_t col, int64_t k) {
        const int64_t left = k - col;
        return left >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << left) - 1u);
    }
};
// fp32 x against weights W (bf16 or fp32), 16 columns per step.
template <class W>
struct F32Step {
    static constexpr int kCols = 16;
    static __m512i load_x(const void* x, int64_t col, int64_t k) {
        return _mm512_castps_si512(_mm512_maskz_loadu_ps(lane_mask(k - col), static_cast<const float*>(x) + col));
    }
    static __m512 madd(__m512 acc, const void* w, __m512i x, int64_t col, int64_t k) {
        return _mm512_fmadd_ps(W::load16(w, col, lane_mask(k - col)), _mm512_castsi512_ps(x), acc);
    }
};

// RW weight rows (pointers) against RA activation rows (x_stride bytes apart): res[r][a].
template <class Step, int RW, int RA>
inline void gemv_tile(const void* const* w, const uint8_t* x, int64_t x_stride, int64_t k, float (&res)[4][4]) {
    __m512 acc[RW][RA];
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_setzero_ps();
    for (int64_t col = 0; col < k; col += Step::kCols) {
        __m512i xv[RA];
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) xv[a] = Step::load_x(x + a * x_stride, col, k);
#pragma GCC unroll 16
        for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
            for (int a = 0; a < RA; ++a) acc[r][a] = Step::madd(acc[r][a], w[r], xv[a], col, k);
    }
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) res[r][a] = hsum(acc[r][a]);
}

template <class Step, int RW>
inline void gemv_rows(const void* const* w, const uint8_t* x, int64_t x_stride, int64_t k, int64_t ra,
                      float (&res)[4][4]) {
    switch (ra) {
        case 4: gemv_tile<Step, RW, 4>(w, x, x_stride, k, res); break;
        case 3: gemv_tile<Step, RW, 3>(w, x, x_stride, k, res); break;
        case 2: gemv_tile<Step, RW, 2>(w, x, x_stride, k, res); break;
        default: gemv_tile<Step, RW, 1>(w, x, x_stride, k, res); break;
    }
}

template <class Step, class Store>
void gemv(const DenseGemmTask& t, int64_t w_elem_bytes, int64_t x_elem_bytes, const Store& store) {
    const auto* w = static_cast<const uint8_t*>(t.w);
    const auto* x = static_cast<const uint8_t*>(t.x);
    const int64_t x_stride = t.k * x_elem_bytes, row_bytes = t.k * w_elem_bytes;
    const int64_t quarter = t.rows / 4;
    auto pass = [&](int rw, const int64_t(&rows)[4]) {
        const void* wr[4];
        for (int r = 0; r < rw; ++r) wr[r] = w + rows[r] * row_bytes;
        for (int64_t i = 0; i < t.n; i += 4) {
            float res[4][4];
            const int64_t ra = t.n - i >= 4 ? 4 : t.n - i;
            if (rw == 4) gemv_rows<Step, 4>(wr, x + i * x_stride, x_stride, t.k, ra, res);
            else gemv_rows<Step, 1>(wr, x + i * x_stride, x_stride, t.k, ra, res);
            for (int r = 0; r < rw; ++r)
                for (int64_t a = 0; a < ra; ++a) store(i + a, rows[r], res[r][a]);
        }
    };
    for (int64_t j = 0; j < quarter; ++j) pass(4, {j, j + quarter, j + 2 * quarter, j + 3 * quarter});
    for (int64_t j = 4 * quarter; j < t.rows; ++j) pass(1, {j, j, j, j});
}

// ---- panel: 16 weight rows in the lanes, k (or column pairs) in order --------------------------------

// panel[c] holds the bf16 column pair c of the 16 rows (rows >= valid are zero); k % 32 == 0.
inline void build_bf16_panel(const uint16_t* w, int64_t k, int64_t valid, __m512i* panel) {
    for (int64_t col = 0; col < k; col += 32) {
        __m512i blk[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) blk[r] = r < valid ? _mm512_loadu_si512(w + r * k + col) : _mm512_setzero_si512();
        transpose16(blk);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c) _mm512_store_si512(panel + col / 2 + c, blk[c]);
    }
}

// panel[c] holds column c of the 16 rows as fp32; k % 16 == 0.
template <class W>
inline void build_f32_panel(const uint8_t* w, int64_t row_bytes, int64_t k, int64_t valid, __m512* panel) {
    for (int64_t col = 0; col < k; col += 16) {
        __m512i blk[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r)
            blk[r] =
                r < valid ? _mm512_castps_si512(W::load16(w + r * row_bytes, col, 0xffff)) : _mm512_setzero_si512();
        transpose16(blk);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c) _mm512_store_ps(panel + col + c, _mm512_castsi512_ps(blk[c]));
    }
}

// R activation rows over the whole panel, accumulators in registers (R independent chains).
template <int R>
inline void bf16_panel_tile(const __m512i* panel, int64_t pairs, const uint32_t* x, int64_t x_stride,
                            __m512 (&acc)[8]) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < pairs; c += 4) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
            const __m512i w = _mm512_load_si512(panel + c + u);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r)
                acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)w,
                                          (__m512bh)_mm512_set1_epi32(static_cast<int>(x[r * x_stride + c + u])));
        }
    }
}

template <int R>
inline void f32_panel_tile(const __m512* panel, int64_t k, const float* x, int64_t x_stride, __m512 (&acc)[8]) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < k; c += 4) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
            const __m512 w = _mm512_load_ps(panel + c + u);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[r * x_stride + c + u]), acc[r]);
        }
    }
}

// Row groups of 16; activation rows in tiles of 8 with a 1-7 tail; store(i, j, mask, v) writes 16 lanes.
template <class Tile, class Store>
inline void panel_rows(int64_t n, int64_t j, __mmask16 mask, const Tile& tile, const Store& store) {
    for (int64_t i = 0; i < n; i += 8) {
        __m512 acc[8];
        const int64_t left = n - i;
        switch (left >= 8 ? 8 : left) {
            case 8: tile.template run<8>(i, acc); break;
            case 7: tile.template run<7>(i, acc); break;
            case 6: tile.template run<6>(i, acc); break;
            case 5: tile.template run<5>(i, acc); break;
            case 4: tile.template run<4>(i, acc); break;
            case 3: tile.template run<3>(i, acc); break;
            case 2: tile.template run<2>(i, acc); break;
            default: tile.template run<1>(i, acc); break;
        }
        for (int64_t r = 0; r < (left >= 8 ? 8 : left); ++r) store(i + r, j, mask, acc[r]);
    }
}

struct Bf16Tile {
    const __m512i* panel;
    int64_t pairs;
    const uint32_t* x;
    template <int R>
    void run(int64_t i, __m512 (&acc)[8]) const {
        bf16_panel_tile<R>(panel, pairs, x + i * pairs, pairs, acc);
    }
};
struct F32Tile {
    const __m512* panel;
    int64_t k;
    const float* x;
    template <int R>
    void run(int64_t i, __m512 (&acc)[8]) const {
        f32_panel_tile<R>(panel, k, x + i * k, k, acc);
    }
};

}  // namespace

void gemm_bf16(const DenseGemmTask& t) {
    auto* out = static_cast<uint16_t*>(t.out);
    const auto* w = static_cast<const uint16_t*>(t.w);
    if (t.n >= kPanelMinRows && t.k % 32 == 0) {
        auto* panel = reinterpret_cast<__m512i*>(t.scratch);
        for (int64_t j = 0; j < t.rows; j += 16) {
            const int64_t valid = t.rows - j < 16 ? t.rows - j : 16;
            build_bf16_panel(w + j * t.k, t.k, valid, panel);
            panel_rows(t.n, j, lane_mask(valid), Bf16Tile{panel, t.k / 2, static_cast<const uint32_t*>(t.x)},
                       [&](int64_t i, int64_t jj, __mmask16 mask, __m512 v) {
                           _mm256_mask_storeu_epi16(out + i * t.ldo + jj, mask, to_bf16(v));
                       });
        }
        return;
    }
    gemv<Bf16Step>(t, 2, 2, [&](int64_t i, int64_t j, float v) {
        out[i * t.ldo + j] = static_cast<uint16_t>(_mm256_extract_epi16(to_bf16(_mm512_set1_ps(v)), 0));
    });
}

namespace {
template <class W>
void gemm_f32_any(const DenseGemmTask& t, int64_t w_elem_bytes) {
    auto* out = static_cast<float*>(t.out);
    const auto* w = static_cast<const uint8_t*>(t.w);
    if (t.n >= kPanelMinRows && t.k % 16 == 0) {
        auto* panel = reinterpret_cast<__m512*>(t.scratch);
        for (int64_t j = 0; j < t.rows; j += 16) {
            const int64_t valid = t.rows - j < 16 ? t.rows - j : 16;
            build_f32_panel<W>(w + j * t.k * w_elem_bytes, t.k * w_elem_bytes, t.k, valid, panel);
            panel_rows(t.n, j, lane_mask(valid), F32Tile{panel, t.k, static_cast<const float*>(t.x)},
                       [&](int64_t i, int64_t jj, __mmask16 mask, __m512 v) {
                           _mm512_mask_storeu_ps(out + i * t.ldo + jj, mask, v);
                       });
        }
        return;
    }
    gemv<F32Step<W>>(t, w_elem_bytes, 4, [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = v; });
}
}  // namespace

void gemm_f32_bf16w(const DenseGemmTask& t) { gemm_f32_any<Bf16W>(t, 2); }
void gemm_f32(const DenseGemmTask& t) { gemm_f32_any<F32W>(t, 4); }

}  // namespace deepinfer::backend::cpu::avx512
