// AVX-512 dense GEMMs: bf16 x bf16 -> bf16 (vdpbf16ps: products exact, fp32 sums), fp32 x bf16 -> fp32 and
// fp32 x fp32 -> fp32 (FMA). Few activation rows (decode) stream each weight row once with k in the
// lanes; many rows use a weight-stationary kernel: a 16-row x 32 (or 16) column weight block is
// transposed into 16 registers (row r in lane r) and every activation row is run against it.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// At or above this many activation rows the weight-stationary kernel wins (measured by bench-ops).
constexpr int64_t kStationaryMinRows = 8;

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
    for (int r = 0; r < 4; ++r)
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_setzero_ps();
    for (int64_t col = 0; col < t.k; col += 32) {
        const int64_t left = t.k - col;
        const __mmask32 m = left >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << left) - 1u);
        __m512i xv[RA];
        for (int a = 0; a < RA; ++a) xv[a] = _mm512_maskz_loadu_epi16(m, x + a * t.k + col);
        for (int r = 0; r < 4; ++r) {
            const __m512i wv = _mm512_maskz_loadu_epi16(m, wr[r] + col);
            for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_dpbf16_ps(acc[r][a], (__m512bh)wv, (__m512bh)xv[a]);
        }
    }
    for (int r = 0; r < 4; ++r)
        for (int a = 0; a < RA; ++a) res[r][a] = hsum(acc[r][a]);
}

template <class W, int RA>
void gemv_f32_tile(const DenseGemmTask& t, const void* const (&wr)[4], int64_t i0, float (&res)[4][4]) {
    const auto* x = static_cast<const float*>(t.x) + i0 * t.k;
    __m512 acc[4][RA];
    for (int r = 0; r < 4; ++r)
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_setzero_ps();
    for (int64_t col = 0; col < t.k; col += 16) {
        const __mmask16 m = lane_mask(t.k - col);
        __m512 xv[RA];
        for (int a = 0; a < RA; ++a) xv[a] = _mm512_maskz_loadu_ps(m, x + a * t.k + col);
        for (int r = 0; r < 4; ++r) {
            const __m512 wv = W::load16(wr[r], col, m);
            for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_fmadd_ps(wv, xv[a], acc[r][a]);
        }
    }
    for (int r = 0; r < 4; ++r)
        for (int a = 0; a < RA; ++a) res[r][a] = hsum(acc[r][a]);
}

// Rows of w in fours (the last four repeat the final row); activation rows in fours with 1-3 at the end.
template <class Tile, class Store>
void gemv(const DenseGemmTask& t, int64_t w_elem_bytes, const Tile& tile, const Store& store) {
    const auto* w = static_cast<const uint8_t*>(t.w);
    for (int64_t j = 0; j < t.rows; j += 4) {
        const void* wr[4];
        for (int r = 0; r < 4; ++r) wr[r] = w + (j + r < t.rows ? j + r : t.rows - 1) * t.k * w_elem_bytes;
        for (int64_t i = 0; i < t.n; i += 4) {
            float res[4][4];
            tile(wr, i, t.n - i, res);
            for (int r = 0; r < 4 && j + r < t.rows; ++r)
                for (int a = 0; a < 4 && i + a < t.n; ++a) store(i + a, j + r, res[r][a]);
        }
    }
}

// ---- weight-stationary: 16 weight rows in the lanes of 16 registers ---------------------------------

// bf16: block of 32 columns; w[c] holds the column pair (2c, 2c + 1) of row r in lane r.
inline void load_bf16_block(const uint16_t* w, int64_t k, int64_t valid_rows, int64_t col, __m512i (&blk)[16]) {
    for (int r = 0; r < 16; ++r)
        blk[r] = r < valid_rows ? _mm512_loadu_si512(w + r * k + col) : _mm512_setzero_si512();
    transpose16(blk);
}

// fp32 view: block of 16 columns; blk[c] holds column c of row r in lane r.
template <class W>
inline void load_f32_block(const uint8_t* w, int64_t row_bytes, int64_t valid_rows, int64_t col, __m512i (&blk)[16]) {
    for (int r = 0; r < 16; ++r)
        blk[r] = r < valid_rows ? _mm512_castps_si512(W::load16(w + r * row_bytes, col, 0xffff)) : _mm512_setzero_si512();
    transpose16(blk);
}

template <int R>
inline void stationary_bf16(const __m512i (&blk)[16], const uint32_t* x, int64_t x_stride, float* acc) {
    __m512 p[R];
    for (int a = 0; a < R; ++a) p[a] = _mm512_load_ps(acc + 16 * a);
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c)
        for (int a = 0; a < R; ++a)
            p[a] = _mm512_dpbf16_ps(p[a], (__m512bh)blk[c], (__m512bh)_mm512_set1_epi32(static_cast<int>(x[a * x_stride + c])));
    for (int a = 0; a < R; ++a) _mm512_store_ps(acc + 16 * a, p[a]);
}

template <int R>
inline void stationary_f32(const __m512i (&blk)[16], const float* x, int64_t x_stride, float* acc) {
    __m512 p[R];
    for (int a = 0; a < R; ++a) p[a] = _mm512_load_ps(acc + 16 * a);
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c)
        for (int a = 0; a < R; ++a) p[a] = _mm512_fmadd_ps(_mm512_castsi512_ps(blk[c]), _mm512_set1_ps(x[a * x_stride + c]), p[a]);
    for (int a = 0; a < R; ++a) _mm512_store_ps(acc + 16 * a, p[a]);
}

// Run `apply<R>` over activation rows [0, n) in groups of 8 with a 4/2/1 tail.
template <class Apply>
inline void over_rows(int64_t n, const Apply& apply) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) apply.template run<8>(i);
    if (i + 4 <= n) apply.template run<4>(i), i += 4;
    if (i + 2 <= n) apply.template run<2>(i), i += 2;
    if (i < n) apply.template run<1>(i);
}

struct Bf16Rows {
    const __m512i (&blk)[16];
    const uint32_t* x;
    int64_t x_stride;
    float* acc;
    template <int R>
    void run(int64_t i) const { stationary_bf16<R>(blk, x + i * x_stride, x_stride, acc + 16 * i); }
};
struct F32Rows {
    const __m512i (&blk)[16];
    const float* x;
    int64_t x_stride;
    float* acc;
    template <int R>
    void run(int64_t i) const { stationary_f32<R>(blk, x + i * x_stride, x_stride, acc + 16 * i); }
};

// Weight-stationary driver: row groups of 16, activation rows in chunks of kActRowChunk (acc in scratch).
template <class Block, class Store>
void stationary(const DenseGemmTask& t, int64_t block_cols, const Block& block, const Store& store) {
    float* acc = t.scratch;
    for (int64_t j = 0; j < t.rows; j += 16) {
        const int64_t valid = t.rows - j < 16 ? t.rows - j : 16;
        for (int64_t i0 = 0; i0 < t.n; i0 += kActRowChunk) {
            const int64_t ni = t.n - i0 < kActRowChunk ? t.n - i0 : kActRowChunk;
            for (int64_t i = 0; i < ni * 16; i += 16) _mm512_store_ps(acc + i, _mm512_setzero_ps());
            for (int64_t col = 0; col < t.k; col += block_cols) block(j, valid, col, i0, ni, acc);
            const __mmask16 mask = lane_mask(valid);
            for (int64_t i = 0; i < ni; ++i) store(i0 + i, j, mask, _mm512_load_ps(acc + 16 * i));
        }
    }
}

template <class W>
void gemm_f32_any(const DenseGemmTask& t, int64_t w_elem_bytes);

}  // namespace

void gemm_bf16(const DenseGemmTask& t) {
    auto* out = static_cast<uint16_t*>(t.out);
    const auto* w = static_cast<const uint16_t*>(t.w);
    if (t.n >= kStationaryMinRows && t.k % 32 == 0) {
        const auto* x = static_cast<const uint32_t*>(t.x);
        stationary(
            t, 32,
            [&](int64_t j, int64_t valid, int64_t col, int64_t i0, int64_t ni, float* acc) {
                __m512i blk[16];
                load_bf16_block(w + j * t.k, t.k, valid, col, blk);
                over_rows(ni, Bf16Rows{blk, x + i0 * (t.k / 2) + col / 2, t.k / 2, acc});
            },
            [&](int64_t i, int64_t j, __mmask16 mask, __m512 v) {
                _mm256_mask_storeu_epi16(out + i * t.ldo + j, mask, to_bf16(v));
            });
        return;
    }
    gemv(
        t, 2,
        [&](const void* const (&wr)[4], int64_t i0, int64_t left, float (&res)[4][4]) {
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
    if (t.n >= kStationaryMinRows && t.k % 16 == 0) {
        const auto* x = static_cast<const float*>(t.x);
        stationary(
            t, 16,
            [&](int64_t j, int64_t valid, int64_t col, int64_t i0, int64_t ni, float* acc) {
                __m512i blk[16];
                load_f32_block<W>(w + j * t.k * w_elem_bytes, t.k * w_elem_bytes, valid, col, blk);
                over_rows(ni, F32Rows{blk, x + i0 * t.k + col, t.k, acc});
            },
            [&](int64_t i, int64_t j, __mmask16 mask, __m512 v) { _mm512_mask_storeu_ps(out + i * t.ldo + j, mask, v); });
        return;
    }
    gemv(
        t, w_elem_bytes,
        [&](const void* const (&wr)[4], int64_t i0, int64_t left, float (&res)[4][4]) {
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
