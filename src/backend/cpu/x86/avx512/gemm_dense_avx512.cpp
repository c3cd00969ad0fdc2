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

// ---- GEMV: k in the lanes, RW weight rows x RA activation rows per pass ----------------------------

template <int RA>
void gemv_bf16_tile(const DenseGemmTask& t, const uint16_t* const (&wr)[4], int64_t i0, float (&res)[4][4]) {
    const auto* x = static_cast<const uint16_t*>(t.x) + i0 * t.k;
    __m512 acc[4][RA];
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_setzero_ps();
    for (int64_t col = 0; col < t.k; col += 32) {
        const int64_t left = t.k - col;
        const __mmask32 m =
            left >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << left) - 1u);
        __m512i xv[RA];
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) xv[a] = _mm512_maskz_loadu_epi16(m, x + a * t.k + col);
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) {
            const __m512i wv = _mm512_maskz_loadu_epi16(m, wr[r] + col);
#pragma GCC unroll 16
            for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_dpbf16_ps(acc[r][a], (__m512bh)wv, (__m512bh)xv[a]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) res[r][a] = hsum(acc[r][a]);
}

template <class W, int RA>
void gemv_f32_tile(const DenseGemmTask& t, const void* const (&wr)[4], int64_t i0, float (&res)[4][4]) {
    const auto* x = static_cast<const float*>(t.x) + i0 * t.k;
    __m512 acc[4][RA];
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_setzero_ps();
    for (int64_t col = 0; col < t.k; col += 16) {
        const __mmask16 m = lane_mask(t.k - col);
        __m512 xv[RA];
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) xv[a] = _mm512_maskz_loadu_ps(m, x + a * t.k + col);
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) {
            const __m512 wv = W::load16(wr[r], col, m);
#pragma GCC unroll 16
            for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_fmadd_ps(wv, xv[a], acc[r][a]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) res[r][a] = hsum(acc[r][a]);
}

// Rows of w in fours (the last four repeat the final row); activation rows in fours with 1-3 at the end.
template <class Tile, class Store>
void gemv(const DenseGemmTask& t, int64_t w_elem_bytes, const Tile& tile, const Store& store) {
    const auto* w = static_cast<const uint8_t*>(t.w);
    for (int64_t j = 0; j < t.rows; j += 4) {
        const void* wr[4];
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) wr[r] = w + (j + r < t.rows ? j + r : t.rows - 1) * t.k * w_elem_bytes;
        for (int64_t i = 0; i < t.n; i += 4) {
            float res[4][4];
            tile(wr, i, t.n - i, res);
            for (int r = 0; r < 4 && j + r < t.rows; ++r)
                for (int a = 0; a < 4 && i + a < t.n; ++a) store(i + a, j + r, res[r][a]);
        }
    }
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
    gemv(
        t, 2,
        [&](const void* const(&wr)[4], int64_t i0, int64_t left, float(&res)[4][4]) {
            const uint16_t* const rows[4] = {static_cast<const uint16_t*>(wr[0]), static_cast<const uint16_t*>(wr[1]),
                                             static_cast<const uint16_t*>(wr[2]), static_cast<const uint16_t*>(wr[3])};
            if (left >= 4) gemv_bf16_tile<4>(t, rows, i0, res);
            else if (left == 3) gemv_bf16_tile<3>(t, rows, i0, res);
            else if (left == 2) gemv_bf16_tile<2>(t, rows, i0, res);
            else gemv_bf16_tile<1>(t, rows, i0, res);
        },
        [&](int64_t i, int64_t j, float v) {
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
    gemv(
        t, w_elem_bytes,
        [&](const void* const(&wr)[4], int64_t i0, int64_t left, float(&res)[4][4]) {
            if (left >= 4) gemv_f32_tile<W, 4>(t, wr, i0, res);
            else if (left == 3) gemv_f32_tile<W, 3>(t, wr, i0, res);
            else if (left == 2) gemv_f32_tile<W, 2>(t, wr, i0, res);
            else gemv_f32_tile<W, 1>(t, wr, i0, res);
        },
        [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = v; });
}
}  // namespace

void gemm_f32_bf16w(const DenseGemmTask& t) { gemm_f32_any<Bf16W>(t, 2); }
void gemm_f32(const DenseGemmTask& t) { gemm_f32_any<F32W>(t, 4); }

}  // namespace deepinfer::backend::cpu::avx512
