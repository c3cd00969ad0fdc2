// AVX2 sparse sink attention (spec §4.7) and lightning-indexer scores (spec §5.3.5) with fp32 FMAs. Dot
// products run over the head dimension in order and P.V over the block's indices in order (bf16 x bf16
// products are exact), so scores and block sums match the reference bit for bit; only exp() differs
// (a ~1 ulp polynomial instead of libm).
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

constexpr int kBlock = 64;  // indices per online-softmax block, as the reference kernel

// kt[d][t] = row t, column d as fp32, for 64 rows (null rows are zero); dim % 8 == 0.
inline void transpose_rows(const uint16_t* const* rows, int dim, float* kt) {
#pragma GCC unroll 16
    for (int g = 0; g < kBlock / 8; ++g)
        for (int d = 0; d < dim; d += 8) {
            __m256 r[8];
#pragma GCC unroll 16
            for (int i = 0; i < 8; ++i) r[i] = rows[8 * g + i] ? load_bf16(rows[8 * g + i] + d) : _mm256_setzero_ps();
            transpose8(r);
#pragma GCC unroll 16
            for (int i = 0; i < 8; ++i) _mm256_store_ps(kt + (d + i) * kBlock + 8 * g, r[i]);
        }
}

// s[h][t] = sum_d q[h][d] kt[d][t], d in order, for RH heads and the 4 column groups starting at tg.
template <int RH>
inline void dots(const float* kt, int dim, const float* q, float* s, int tg) {
    __m256 acc[RH][4];
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h)
#pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) acc[h][g] = _mm256_setzero_ps();
    for (int d = 0; d < dim; ++d) {
        const float* row = kt + d * kBlock + 8 * tg;
        const __m256 k0 = _mm256_load_ps(row), k1 = _mm256_load_ps(row + 8);
        const __m256 k2 = _mm256_load_ps(row + 16), k3 = _mm256_load_ps(row + 24);
#pragma GCC unroll 16
        for (int h = 0; h < RH; ++h) {
            const __m256 qv = _mm256_broadcast_ss(q + h * dim + d);
            acc[h][0] = _mm256_fmadd_ps(k0, qv, acc[h][0]);
            acc[h][1] = _mm256_fmadd_ps(k1, qv, acc[h][1]);
            acc[h][2] = _mm256_fmadd_ps(k2, qv, acc[h][2]);
            acc[h][3] = _mm256_fmadd_ps(k3, qv, acc[h][3]);
        }
    }
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h)
#pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) _mm256_store_ps(s + h * kBlock + 8 * (tg + g), acc[h][g]);
}

// dots out of line, for index_scores: inlined there, where 8 running sums stay in registers around it, its loop
// kept 2 of its 12 accumulators on the stack (a store and a reload per step, a chain through memory).
template <int RH>
[[gnu::noinline]] void dots_apart(const float* kt, int dim, const float* q, float* s, int tg) {
    dots<RH>(kt, dim, q, s, tg);
}

inline void all_dots(const float* kt, int dim, const float* q, int heads, float* s) {
#pragma GCC unroll 16
    for (int tg = 0; tg < kBlock / 8; tg += 4) {
        int h = 0;
        for (; h + 3 <= heads; h += 3) dots<3>(kt, dim, q + h * dim, s + h * kBlock, tg);
        for (; h < heads; ++h) dots<1>(kt, dim, q + h * dim, s + h * kBlock, tg);
    }
}

// acc[h] = acc[h] * rescale[h] + sum_t p[h][t] kv[t] (t in order) for RH heads, columns [d0, d0 + 32).
template <int RH>
inline void pv(const float* kv, int dim, const float* p, int d0, float* acc, const float* rescale) {
    __m256 b[RH][4];
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h)
#pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) b[h][g] = _mm256_setzero_ps();
    for (int t = 0; t < kBlock; ++t) {
        const float* row = kv + t * dim + d0;
        const __m256 v0 = _mm256_load_ps(row), v1 = _mm256_load_ps(row + 8);
        const __m256 v2 = _mm256_load_ps(row + 16), v3 = _mm256_load_ps(row + 24);
#pragma GCC unroll 16
        for (int h = 0; h < RH; ++h) {
            const __m256 pv = _mm256_broadcast_ss(p + h * kBlock + t);
            b[h][0] = _mm256_fmadd_ps(v0, pv, b[h][0]);
            b[h][1] = _mm256_fmadd_ps(v1, pv, b[h][1]);
            b[h][2] = _mm256_fmadd_ps(v2, pv, b[h][2]);
            b[h][3] = _mm256_fmadd_ps(v3, pv, b[h][3]);
        }
    }
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h) {
        const __m256 r = _mm256_set1_ps(rescale[h]);
        float* a = acc + h * dim + d0;
#pragma GCC unroll 16
        for (int g = 0; g < 4; ++g)
            _mm256_store_ps(a + 8 * g, _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(a + 8 * g), r), b[h][g]));
    }
}

inline float scalar_exp(float x) { return _mm256_cvtss_f32(exp_ps(_mm256_set1_ps(x))); }

inline void to_f32(const uint16_t* src, int64_t count, float* dst) {
    for (int64_t e = 0; e < count; e += 8) _mm256_store_ps(dst + e, load_bf16(src + e));
}

}  // namespace

void sparse_attn(const SparseAttnTask& t) {
    const int dim = t.dim, nh = t.h1 - t.h0;
    uint8_t* mem = align64(t.scratch);
    auto* kt = reinterpret_cast<float*>(mem);  // [dim][64]
    mem += static_cast<size_t>(dim) * kBlock * 4;
    auto* kvf = reinterpret_cast<float*>(mem);  // [64][dim]
    mem += static_cast<size_t>(dim) * kBlock * 4;
    auto* s = reinterpret_cast<float*>(mem);  // [nh][64] scores, then bf16-rounded probabilities
    mem += static_cast<size_t>(nh) * kBlock * 4;
    auto* acc = reinterpret_cast<float*>(mem);  // [nh][dim]
    mem += static_cast<size_t>(nh) * dim * 4;
    auto* qf = reinterpret_cast<float*>(mem);  // [nh][dim]
    mem += static_cast<size_t>(nh) * dim * 4;
    auto* running_max = reinterpret_cast<float*>(mem);
    auto* sum_exp = running_max + nh;
    auto* rescale = sum_exp + nh;
    const auto* kv = reinterpret_cast<const uint16_t*>(t.kv);
    const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
    for (int64_t i = t.i0; i < t.i1; ++i) {
        const int32_t* list = t.idx + i * t.topk;
        to_f32(reinterpret_cast<const uint16_t*>(t.q + (i * t.heads + t.h0) * dim), static_cast<int64_t>(nh) * dim, qf);
        for (int64_t x = 0; x < static_cast<int64_t>(nh) * dim; x += 8) _mm256_store_ps(acc + x, _mm256_setzero_ps());
        for (int h = 0; h < nh; ++h) running_max[h] = -1e30f, sum_exp[h] = 0.0f;
        for (int b0 = 0; b0 < t.topk; b0 += kBlock) {
            const int bn = t.topk - b0 < kBlock ? t.topk - b0 : kBlock;
            const uint16_t* rows[kBlock];
            for (int r = 0; r < kBlock; ++r) {
                const int32_t j = r < bn ? list[b0 + r] : -1;
                rows[r] = j >= 0 ? kv + static_cast<int64_t>(j) * dim : nullptr;
                if (rows[r]) to_f32(rows[r], dim, kvf + r * dim);
                else
                    for (int d = 0; d < dim; d += 8) _mm256_store_ps(kvf + r * dim + d, _mm256_setzero_ps());
            }
            transpose_rows(rows, dim, kt);
            all_dots(kt, dim, qf, nh, s);
            const __m256 scale = _mm256_set1_ps(t.scale);
            alignas(32) int32_t valid[kBlock];  // all ones where the block has a kv row
            for (int r = 0; r < kBlock; ++r) valid[r] = rows[r] ? -1 : 0;
            for (int h = 0; h < nh; ++h) {
                __m256 sv[kBlock / 8];
                __m256 m = neg_inf;
#pragma GCC unroll 16
                for (int g = 0; g < kBlock / 8; ++g) {
                    const __m256 v = _mm256_mul_ps(_mm256_load_ps(s + h * kBlock + 8 * g), scale);
                    const __m256 keep =
                        _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(valid + 8 * g)));
                    sv[g] = _mm256_blendv_ps(neg_inf, v, keep);
                    m = _mm256_max_ps(m, sv[g]);
                }
                const float block_max = hmax(m);
                const float new_max = running_max[h] > block_max ? running_max[h] : block_max;
                const __m256 nm = _mm256_set1_ps(new_max);
                __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 16
                for (int g = 0; g < kBlock / 8; ++g) {
                    const __m256 e = exp_ps(_mm256_sub_ps(sv[g], nm));
                    sum = _mm256_add_ps(sum, e);
                    _mm256_store_ps(s + h * kBlock + 8 * g, round_bf16(e));
                }
                const float r = scalar_exp(running_max[h] - new_max);
                rescale[h] = r;
                sum_exp[h] = sum_exp[h] * r + hsum(sum);
                running_max[h] = new_max;
            }
            for (int d0 = 0; d0 < dim; d0 += 32) {
                int h = 0;
                for (; h + 3 <= nh; h += 3) pv<3>(kvf, dim, s + h * kBlock, d0, acc + h * dim, rescale + h);
                for (; h < nh; ++h) pv<1>(kvf, dim, s + h * kBlock, d0, acc + h * dim, rescale + h);
            }
        }
        for (int h = 0; h < nh; ++h) {
            const __m256 denom = _mm256_set1_ps(sum_exp[h] + scalar_exp(t.sink[t.h0 + h] - running_max[h]));
            auto* o = reinterpret_cast<uint16_t*>(t.out + (i * t.heads + t.h0 + h) * dim);
            for (int d = 0; d < dim; d += 8)
                _mm_storeu_si128(reinterpret_cast<__m128i*>(o + d),
                                 to_bf16(_mm256_div_ps(_mm256_load_ps(acc + h * dim + d), denom)));
        }
    }
}

void index_scores(const IndexScoresTask& t) {
    const int dim = t.dim;
    uint8_t* mem = align64(t.scratch);
    auto* kt = reinterpret_cast<float*>(mem);           // [dim][64]
    auto* qf = kt + static_cast<size_t>(dim) * kBlock;  // [heads][dim]
    const auto* keys = reinterpret_cast<const uint16_t*>(t.keys);
    const auto* wts = reinterpret_cast<const uint16_t*>(t.w);
    alignas(32) float s[3 * kBlock];
    for (int64_t j0 = t.j0; j0 < t.j1; j0 += kBlock) {
        const int bn = t.j1 - j0 < kBlock ? static_cast<int>(t.j1 - j0) : kBlock;
        const uint16_t* rows[kBlock];
        for (int r = 0; r < kBlock; ++r) rows[r] = r < bn ? keys + (j0 + r) * dim : nullptr;
        transpose_rows(rows, dim, kt);
        for (int64_t i = t.i0; i < t.i1; ++i) {
            to_f32(reinterpret_cast<const uint16_t*>(t.q + i * t.heads * dim), static_cast<int64_t>(t.heads) * dim, qf);
            __m256 total[kBlock / 8];
            for (auto& v : total) v = _mm256_setzero_ps();
            for (int h = 0; h < t.heads; h += 3) {
                const int nh = t.heads - h < 3 ? t.heads - h : 3;
#pragma GCC unroll 16
                for (int tg = 0; tg < kBlock / 8; tg += 4) {
                    if (nh == 3) dots_apart<3>(kt, dim, qf + h * dim, s, tg);
                    else if (nh == 2) dots_apart<2>(kt, dim, qf + h * dim, s, tg);
                    else dots_apart<1>(kt, dim, qf + h * dim, s, tg);
                }
                for (int a = 0; a < nh; ++a) add_head_scores(total, s + a * kBlock, wts[i * t.heads + h + a]);
            }
            store_head_scores(total, bn, t.out + i * t.ldo + j0);
        }
    }
}

}  // namespace deepinfer::backend::cpu::avx2
