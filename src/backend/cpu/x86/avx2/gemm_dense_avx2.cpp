// AVX2 dense GEMMs: bf16 x bf16 -> bf16, fp32 x bf16 -> fp32, fp32 x fp32 -> fp32, all with fp32 FMAs.
// Few activation rows stream each weight row once with k in the lanes. Many rows first transpose a
// 16-row panel of the weight to fp32 [k][16] (L2-resident) and run tiles of activation rows over it with
// the rows in the lanes and k in order, so bf16 x bf16 (exact products) matches the reference bit for bit.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

constexpr int64_t kPanelMinRows = 16;  // activation rows from which the panel kernel wins
constexpr int kTileRows = 6;           // activation rows per panel pass (12 accumulators)

struct Bf16 {
    using T = uint16_t;
    static __m256 load8(const T* p) { return load_bf16(p); }
    static float one(const T* p) {
        const uint32_t bits = static_cast<uint32_t>(*p) << 16;
        float f;
        __builtin_memcpy(&f, &bits, 4);
        return f;
    }
};
struct F32 {
    using T = float;
    static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
    static float one(const T* p) { return *p; }
};

// ---- GEMV: k in the lanes, 4 weight rows x up to 2 activation rows per pass --------------------------
// The 4 rows of a pass come from the 4 quarters of the task's rows: rows read side by side from adjacent
// addresses measured ~30% below the read bandwidth, rows >= 4 rows apart within 5-10%.

template <class X, class W, int RW, int RA>
void gemv_tile(const typename X::T* x, int64_t k, const typename W::T* const* w, float (&res)[4][2]) {
    __m256 acc[RW][RA];
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm256_setzero_ps();
    int64_t col = 0;
    for (; col + 8 <= k; col += 8) {
        __m256 xv[RA];
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) xv[a] = X::load8(x + a * k + col);
#pragma GCC unroll 16
        for (int r = 0; r < RW; ++r) {
            const __m256 wv = W::load8(w[r] + col);
#pragma GCC unroll 16
            for (int a = 0; a < RA; ++a) acc[r][a] = _mm256_fmadd_ps(wv, xv[a], acc[r][a]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) {
            float s = hsum(acc[r][a]);
            for (int64_t c = col; c < k; ++c) s += X::one(x + a * k + c) * W::one(w[r] + c);
            res[r][a] = s;
        }
}

template <class X, class W, class Store>
void gemv(const DenseGemmTask& t, const Store& store) {
    const auto* x = static_cast<const typename X::T*>(t.x);
    const auto* w = static_cast<const typename W::T*>(t.w);
    const int64_t quarter = t.rows / 4;
    auto pass = [&](int rw, const int64_t(&rows)[4]) {
        const typename W::T* wr[4];
        for (int r = 0; r < rw; ++r) wr[r] = w + rows[r] * t.k;
        for (int64_t i = 0; i < t.n; i += 2) {
            float res[4][2] = {};
            const bool two = t.n - i >= 2;
            if (rw == 4)
                two ? gemv_tile<X, W, 4, 2>(x + i * t.k, t.k, wr, res)
                    : gemv_tile<X, W, 4, 1>(x + i * t.k, t.k, wr, res);
            else
                two ? gemv_tile<X, W, 1, 2>(x + i * t.k, t.k, wr, res)
                    : gemv_tile<X, W, 1, 1>(x + i * t.k, t.k, wr, res);
            for (int r = 0; r < rw; ++r)
                for (int a = 0; a < (two ? 2 : 1); ++a) store(i + a, rows[r], res[r][a]);
        }
    };
    for (int64_t j = 0; j < quarter; ++j) pass(4, {j, j + quarter, j + 2 * quarter, j + 3 * quarter});
    for (int64_t j = 4 * quarter; j < t.rows; ++j) pass(1, {j, j, j, j});
}

// ---- panel kernel ----------------------------------------------------------------------------------

// panel[c][r] = w[r][c] as fp32 for 16 rows (rows >= valid are zero).
template <class W>
void build_panel(const typename W::T* w, int64_t k, int64_t valid, float* panel) {
    int64_t col = 0;
    for (; col + 8 <= k; col += 8)
#pragma GCC unroll 16
        for (int half = 0; half < 2; ++half) {
            __m256 r[8];
#pragma GCC unroll 16
            for (int i = 0; i < 8; ++i) {
                const int64_t row = 8 * half + i;
                r[i] = row < valid ? W::load8(w + row * k + col) : _mm256_setzero_ps();
            }
            transpose8(r);
#pragma GCC unroll 16
            for (int i = 0; i < 8; ++i) _mm256_store_ps(panel + (col + i) * 16 + 8 * half, r[i]);
        }
    for (; col < k; ++col)
#pragma GCC unroll 16
        for (int row = 0; row < 16; ++row) panel[col * 16 + row] = row < valid ? W::one(w + row * k + col) : 0.0f;
}

template <int RA>
void panel_tile(const float* panel, int64_t k, const float* x, float* out) {
    __m256 acc[RA][2];
#pragma GCC unroll 16
    for (int a = 0; a < RA; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    for (int64_t c = 0; c < k; ++c) {
        const __m256 w0 = _mm256_load_ps(panel + c * 16), w1 = _mm256_load_ps(panel + c * 16 + 8);
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) {
            const __m256 xv = _mm256_broadcast_ss(x + a * k + c);
            acc[a][0] = _mm256_fmadd_ps(w0, xv, acc[a][0]);
            acc[a][1] = _mm256_fmadd_ps(w1, xv, acc[a][1]);
        }
    }
#pragma GCC unroll 16
    for (int a = 0; a < RA; ++a) {
        _mm256_store_ps(out + 16 * a, acc[a][0]);
        _mm256_store_ps(out + 16 * a + 8, acc[a][1]);
    }
}

// x rows as fp32 (converted per tile when x is bf16), out[a][16] per activation row of the tile.
template <class X, class W, class Store>
void panel_gemm(const DenseGemmTask& t, const Store& store) {
    const auto* x = static_cast<const typename X::T*>(t.x);
    const auto* w = static_cast<const typename W::T*>(t.w);
    float* tile_out = t.scratch;    // kTileRows x 16
    float* xbuf = t.scratch + 128;  // kTileRows x k (bf16 x only)
    float* panel = t.scratch + 128 + kTileRows * t.k + 64;
    panel = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(panel) + 63) & ~static_cast<uintptr_t>(63));
    for (int64_t j = 0; j < t.rows; j += 16) {
        const int64_t valid = t.rows - j < 16 ? t.rows - j : 16;
        build_panel<W>(w + j * t.k, t.k, valid, panel);
        for (int64_t i = 0; i < t.n; i += kTileRows) {
            const int ra = t.n - i < kTileRows ? static_cast<int>(t.n - i) : kTileRows;
            const float* xs;
            if constexpr (sizeof(typename X::T) == 4) {
                xs = reinterpret_cast<const float*>(x + i * t.k);
            } else {
                for (int64_t e = 0; e < ra * t.k; ++e) xbuf[e] = X::one(x + i * t.k + e);
                xs = xbuf;
            }
            switch (ra) {
                case 6: panel_tile<6>(panel, t.k, xs, tile_out); break;
                case 5: panel_tile<5>(panel, t.k, xs, tile_out); break;
                case 4: panel_tile<4>(panel, t.k, xs, tile_out); break;
                case 3: panel_tile<3>(panel, t.k, xs, tile_out); break;
                case 2: panel_tile<2>(panel, t.k, xs, tile_out); break;
                default: panel_tile<1>(panel, t.k, xs, tile_out); break;
            }
            for (int a = 0; a < ra; ++a)
                for (int64_t r = 0; r < valid; ++r) store(i + a, j + r, tile_out[16 * a + r]);
        }
    }
}

template <class X, class W, class Store>
void gemm_any(const DenseGemmTask& t, const Store& store) {
    if (t.n >= kPanelMinRows) panel_gemm<X, W>(t, store);
    else gemv<X, W>(t, store);
}

inline uint16_t float_to_bf16_bits(float v) {
    return static_cast<uint16_t>(_mm_extract_epi16(to_bf16(_mm256_set1_ps(v)), 0));
}

}  // namespace

void gemm_bf16(const DenseGemmTask& t) {
    auto* out = static_cast<uint16_t*>(t.out);
    gemm_any<Bf16, Bf16>(t, [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = float_to_bf16_bits(v); });
}

void gemm_f32_bf16w(const DenseGemmTask& t) {
    auto* out = static_cast<float*>(t.out);
    gemm_any<F32, Bf16>(t, [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = v; });
}

void gemm_f32(const DenseGemmTask& t) {
    auto* out = static_cast<float*>(t.out);
    gemm_any<F32, F32>(t, [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = v; });
}

}  // namespace deepinfer::backend::cpu::avx2
