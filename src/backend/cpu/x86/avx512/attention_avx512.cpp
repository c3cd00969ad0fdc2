// AVX-512 sparse sink attention (spec §4.7) and lightning-indexer scores (spec §5.3.5). Both run their
// dot products as small GEMMs with vdpbf16ps, or on AMX tiles where the CPU has them (attention_amx.cpp; bf16
// products are exact in fp32, only the summation order differs from the reference) and keep the reference's rounding points: bf16 probabilities before P.V
// with an fp32 denominator, online softmax over blocks of 64 indices; bf16 dot / relu / weight products
// summed over heads in order for the scores.
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/attention_amx.h"
#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

constexpr int kBlock = 64;  // indices per online-softmax block, as the reference kernel

// Scores of RH heads x 64 kv rows: kt is the transposed block [dim/2][64] of column pairs, q the heads'
// rows as column pairs. s[h][t] = sum_c q[h, c] kv[t, c].
template <int RH>
inline void qk_tile(const uint32_t* kt, int pairs, const uint32_t* q, int64_t q_stride, float* s) {
    __m512 acc[RH][4];
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h)
#pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) acc[h][g] = _mm512_setzero_ps();
    for (int c = 0; c < pairs; ++c) {
        const __m512i k0 = _mm512_load_si512(kt + c * kBlock), k1 = _mm512_load_si512(kt + c * kBlock + 16);
        const __m512i k2 = _mm512_load_si512(kt + c * kBlock + 32), k3 = _mm512_load_si512(kt + c * kBlock + 48);
#pragma GCC unroll 16
        for (int h = 0; h < RH; ++h) {
            const __m512bh qv = (__m512bh)_mm512_set1_epi32(static_cast<int>(q[h * q_stride + c]));
            acc[h][0] = _mm512_dpbf16_ps(acc[h][0], (__m512bh)k0, qv);
            acc[h][1] = _mm512_dpbf16_ps(acc[h][1], (__m512bh)k1, qv);
            acc[h][2] = _mm512_dpbf16_ps(acc[h][2], (__m512bh)k2, qv);
            acc[h][3] = _mm512_dpbf16_ps(acc[h][3], (__m512bh)k3, qv);
        }
    }
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h)
#pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) _mm512_store_ps(s + h * kBlock + 16 * g, acc[h][g]);
}

// block_pv of RH heads over NC chunks of 16 lanes: kp is [32 row pairs][dim] dwords (two kv rows' values
// of one column, columns in unpack order), p the heads' bf16 probabilities as row pairs.
template <int RH, int NC>
inline void pv_tile(const uint32_t* kp, int dim, const uint32_t* p, int chunk0, float* acc, int64_t acc_stride,
                    const float* rescale) {
    __m512 bpv[RH][NC];
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h)
#pragma GCC unroll 16
        for (int g = 0; g < NC; ++g) bpv[h][g] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int tp = 0; tp < kBlock / 2; ++tp) {
        const uint32_t* row = kp + tp * dim + chunk0 * 16;
        __m512i v[NC];
#pragma GCC unroll 16
        for (int g = 0; g < NC; ++g) v[g] = _mm512_load_si512(row + 16 * g);
#pragma GCC unroll 16
        for (int h = 0; h < RH; ++h) {
            const __m512bh pv = (__m512bh)_mm512_set1_epi32(static_cast<int>(p[h * (kBlock / 2) + tp]));
#pragma GCC unroll 16
            for (int g = 0; g < NC; ++g) bpv[h][g] = _mm512_dpbf16_ps(bpv[h][g], (__m512bh)v[g], pv);
        }
    }
    // acc = acc * rescale + block_pv, two roundings as in the reference
#pragma GCC unroll 16
    for (int h = 0; h < RH; ++h) {
        const __m512 r = _mm512_set1_ps(rescale[h]);
        float* a = acc + h * acc_stride + chunk0 * 16;
#pragma GCC unroll 16
        for (int g = 0; g < NC; ++g)
            _mm512_store_ps(a + 16 * g, _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(a + 16 * g), r), bpv[h][g]));
    }
}

// All heads x all column chunks (dim / 16 is even): tiles of 4 heads x 4 chunks, tails of 1 head / 2 chunks.
template <int RH>
inline void pv_heads(const uint32_t* kp, int dim, const uint32_t* p, float* acc, const float* rescale) {
    int c = 0;
    for (; c + 4 <= dim / 16; c += 4) pv_tile<RH, 4>(kp, dim, p, c, acc, dim, rescale);
    if (c < dim / 16) pv_tile<RH, 2>(kp, dim, p, c, acc, dim, rescale);
}

template <class F>
inline void over_heads(int heads, const F& f) {
    int h = 0;
    for (; h + 4 <= heads; h += 4) f.template run<4>(h);
    for (; h < heads; ++h) f.template run<1>(h);
}

struct QkHeads {
    const uint32_t* kt;
    int pairs;
    const uint32_t* q;
    int64_t q_stride;
    float* s;
    template <int RH>
    void run(int h) const {
        qk_tile<RH>(kt, pairs, q + h * q_stride, q_stride, s + h * kBlock);
    }
};

}  // namespace

void sparse_attn(const SparseAttnTask& t) {
    const int dim = t.dim, pairs = dim / 2, nh = t.h1 - t.h0;
    uint8_t* mem = align64(t.scratch);
    auto* kt = reinterpret_cast<uint32_t*>(mem);  // [pairs][64]: column pair c of kv row t
    mem += static_cast<size_t>(pairs) * kBlock * 4;
    auto* kp = reinterpret_cast<uint32_t*>(mem);  // [32][dim]: rows (2tp, 2tp + 1) of column d (unpack order)
    mem += static_cast<size_t>(kBlock / 2) * dim * 4;
    auto* s = reinterpret_cast<float*>(mem);  // [nh][64] scores
    mem += static_cast<size_t>(nh) * kBlock * 4;
    auto* p = reinterpret_cast<uint16_t*>(mem);  // [nh][64] bf16 probabilities
    mem += static_cast<size_t>(nh) * kBlock * 2 + 64;
    mem = align64(mem);
    auto* acc = reinterpret_cast<float*>(mem);  // [nh][dim], columns in unpack order
    mem += static_cast<size_t>(nh) * dim * 4;
    auto* running_max = reinterpret_cast<float*>(mem);
    auto* sum_exp = running_max + nh;
    auto* rescale = sum_exp + nh;
    const auto* kv = reinterpret_cast<const uint16_t*>(t.kv);
    const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
    // On AMX tiles where the CPU has them (attention_amx.cpp), for every query alike; the tile shapes follow the
    // heads of each group of up to 16.
    const bool amx = amx_enabled();
    int configured = 0;
    auto tiles_for = [&](int h) {
        const int rows = nh - h < 16 ? nh - h : 16;
        if (rows != configured) attn_amx_configure(configured = rows);
        return rows;
    };
    for (int64_t i = t.i0; i < t.i1; ++i) {
        const int32_t* list = t.idx + i * t.topk;
        const auto* q = reinterpret_cast<const uint32_t*>(t.q + (i * t.heads + t.h0) * dim);
        for (int64_t x = 0; x < static_cast<int64_t>(nh) * dim; x += 16) _mm512_store_ps(acc + x, _mm512_setzero_ps());
        for (int h = 0; h < nh; ++h) running_max[h] = -1e30f, sum_exp[h] = 0.0f;
        for (int b0 = 0; b0 < t.topk; b0 += kBlock) {
            const int bn = t.topk - b0 < kBlock ? t.topk - b0 : kBlock;
            // kv rows of the block (invalid and missing rows are zero)
            const uint16_t* rows[kBlock];
            uint64_t valid_bits = 0;
            for (int r = 0; r < kBlock; ++r) {
                const int32_t j = r < bn ? list[b0 + r] : -1;
                rows[r] = j >= 0 ? kv + static_cast<int64_t>(j) * dim : nullptr;
                if (j >= 0) valid_bits |= uint64_t{1} << r;
            }
#pragma GCC unroll 16
            for (int g = 0; g < 4; ++g)
                for (int c0 = 0; c0 < pairs; c0 += 16) {
                    __m512i blk[16];
#pragma GCC unroll 16
                    for (int r = 0; r < 16; ++r) {
                        const uint16_t* row = rows[16 * g + r];
                        blk[r] = row ? _mm512_loadu_si512(row + 2 * c0) : _mm512_setzero_si512();
                    }
                    transpose16(blk);
#pragma GCC unroll 16
                    for (int c = 0; c < 16; ++c) _mm512_store_si512(kt + (c0 + c) * kBlock + 16 * g, blk[c]);
                }
#pragma GCC unroll 16
            for (int tp = 0; tp < kBlock / 2; ++tp) {
                const uint16_t* r0 = rows[2 * tp];
                const uint16_t* r1 = rows[2 * tp + 1];
                for (int d = 0; d < dim; d += 32) {
                    const __m512i a = r0 ? _mm512_loadu_si512(r0 + d) : _mm512_setzero_si512();
                    const __m512i b = r1 ? _mm512_loadu_si512(r1 + d) : _mm512_setzero_si512();
                    _mm512_store_si512(kp + tp * dim + d, _mm512_unpacklo_epi16(a, b));
                    _mm512_store_si512(kp + tp * dim + d + 16, _mm512_unpackhi_epi16(a, b));
                }
            }
            if (amx)
                for (int h = 0; h < nh; h += 16) {
                    tiles_for(h);
                    qk_amx(kt, dim, q + h * pairs, pairs, s + h * kBlock);
                }
            else
                over_heads(nh, QkHeads{kt, pairs, q, pairs, s});
            // online softmax of the block, per head
            const __mmask16 valid[4] = {static_cast<__mmask16>(valid_bits), static_cast<__mmask16>(valid_bits >> 16),
                                        static_cast<__mmask16>(valid_bits >> 32),
                                        static_cast<__mmask16>(valid_bits >> 48)};
            const __m512 scale = _mm512_set1_ps(t.scale);
            for (int h = 0; h < nh; ++h) {
                __m512 sv[4];
                __m512 m = neg_inf;
#pragma GCC unroll 16
                for (int g = 0; g < 4; ++g) {
                    sv[g] = _mm512_mask_mov_ps(neg_inf, valid[g],
                                               _mm512_mul_ps(_mm512_load_ps(s + h * kBlock + 16 * g), scale));
                    m = _mm512_max_ps(m, sv[g]);
                }
                const float block_max = _mm512_reduce_max_ps(m);
                const float new_max = running_max[h] > block_max ? running_max[h] : block_max;
                const __m512 nm = _mm512_set1_ps(new_max);
                __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
                for (int g = 0; g < 4; ++g) {
                    const __m512 e = exp_ps(_mm512_sub_ps(sv[g], nm));
                    sum = _mm512_add_ps(sum, e);
                    _mm256_store_si256(reinterpret_cast<__m256i*>(p + h * kBlock + 16 * g), to_bf16(e));
                }
                const float r = _mm512_cvtss_f32(exp_ps(_mm512_set1_ps(running_max[h] - new_max)));
                rescale[h] = r;
                sum_exp[h] = sum_exp[h] * r + _mm512_reduce_add_ps(sum);
                running_max[h] = new_max;
            }
            if (amx) {
                for (int h = 0; h < nh; h += 16)
                    pv_amx(kp, dim, p + h * kBlock, acc + h * dim, rescale + h, tiles_for(h));
                continue;
            }
            const auto* pp = reinterpret_cast<const uint32_t*>(p);
            int h = 0;
            for (; h + 4 <= nh; h += 4) pv_heads<4>(kp, dim, pp + h * (kBlock / 2), acc + h * dim, rescale + h);
            for (; h < nh; ++h) pv_heads<1>(kp, dim, pp + h * (kBlock / 2), acc + h * dim, rescale + h);
        }
        const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
        const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
        for (int h = 0; h < nh; ++h) {
            const float total =
                sum_exp[h] + _mm512_cvtss_f32(exp_ps(_mm512_set1_ps(t.sink[t.h0 + h] - running_max[h])));
            const __m512 denom = _mm512_set1_ps(total);
            auto* o = reinterpret_cast<uint16_t*>(t.out + (i * t.heads + t.h0 + h) * dim);
            for (int d = 0; d < dim; d += 32) {
                const __m512 lo = _mm512_load_ps(acc + h * dim + d), hi = _mm512_load_ps(acc + h * dim + d + 16);
                const __m512 o0 = _mm512_castsi512_ps(
                    _mm512_permutex2var_epi64(_mm512_castps_si512(lo), first, _mm512_castps_si512(hi)));
                const __m512 o1 = _mm512_castsi512_ps(
                    _mm512_permutex2var_epi64(_mm512_castps_si512(lo), second, _mm512_castps_si512(hi)));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + d), to_bf16(_mm512_div_ps(o0, denom)));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + d + 16), to_bf16(_mm512_div_ps(o1, denom)));
            }
        }
    }
    if (configured) attn_amx_release();
}

void index_scores(const IndexScoresTask& t) {
    const int dim = t.dim, pairs = dim / 2;
    auto* kt = reinterpret_cast<uint32_t*>(align64(t.scratch));  // [pairs][64]
    const auto* keys = reinterpret_cast<const uint16_t*>(t.keys);
    const auto* wts = reinterpret_cast<const uint16_t*>(t.w);
    const __m512 zero = _mm512_setzero_ps();
    // The dots on AMX tiles where the CPU has them (attention_amx.cpp qk_amx, 16 heads at a time), for every
    // query alike; the heads' terms are then added in order as below.
    const bool amx = amx_enabled();
    int configured = 0;
    alignas(64) float dots[16 * kBlock];
    for (int64_t j0 = t.j0; j0 < t.j1; j0 += kBlock) {
        const int bn = t.j1 - j0 < kBlock ? static_cast<int>(t.j1 - j0) : kBlock;
#pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) {
            const int valid = bn - 16 * g;
            for (int c0 = 0; c0 < pairs; c0 += 16) {
                __m512i blk[16];
                if (valid > 0) load_pairs_transposed(keys + (j0 + 16 * g) * dim + 2 * c0, dim, valid, blk);
                else
                    for (auto& b : blk) b = _mm512_setzero_si512();
#pragma GCC unroll 16
                for (int c = 0; c < 16; ++c) _mm512_store_si512(kt + (c0 + c) * kBlock + 16 * g, blk[c]);
            }
        }
        for (int64_t i = t.i0; i < t.i1; ++i) {
            const auto* q = reinterpret_cast<const uint32_t*>(t.q + i * t.heads * dim);
            __m512 total[4] = {zero, zero, zero, zero};
            for (int h0 = 0; amx && h0 < t.heads; h0 += 16) {
                const int rows = t.heads - h0 < 16 ? t.heads - h0 : 16;
                if (rows != configured) attn_amx_configure(configured = rows);
                qk_amx(kt, dim, q + h0 * pairs, pairs, dots);
                for (int a = 0; a < rows; ++a) {
                    const __m512 dot[4] = {_mm512_load_ps(dots + a * kBlock), _mm512_load_ps(dots + a * kBlock + 16),
                                           _mm512_load_ps(dots + a * kBlock + 32),
                                           _mm512_load_ps(dots + a * kBlock + 48)};
                    add_head_scores(total, dot, wts[i * t.heads + h0 + a]);
                }
            }
            for (int h = 0; !amx && h < t.heads; h += 2) {
                const int nh = t.heads - h >= 2 ? 2 : 1;
                __m512 acc[2][4];
#pragma GCC unroll 16
                for (int a = 0; a < 2; ++a)
#pragma GCC unroll 16
                    for (int g = 0; g < 4; ++g) acc[a][g] = zero;
                for (int c = 0; c < pairs; ++c) {
                    const __m512i k0 = _mm512_load_si512(kt + c * kBlock), k1 = _mm512_load_si512(kt + c * kBlock + 16);
                    const __m512i k2 = _mm512_load_si512(kt + c * kBlock + 32),
                                  k3 = _mm512_load_si512(kt + c * kBlock + 48);
                    for (int a = 0; a < nh; ++a) {
                        const __m512bh qv = (__m512bh)_mm512_set1_epi32(static_cast<int>(q[(h + a) * pairs + c]));
                        acc[a][0] = _mm512_dpbf16_ps(acc[a][0], (__m512bh)k0, qv);
                        acc[a][1] = _mm512_dpbf16_ps(acc[a][1], (__m512bh)k1, qv);
                        acc[a][2] = _mm512_dpbf16_ps(acc[a][2], (__m512bh)k2, qv);
                        acc[a][3] = _mm512_dpbf16_ps(acc[a][3], (__m512bh)k3, qv);
                    }
                }
                // heads in order
                for (int a = 0; a < nh; ++a) add_head_scores(total, acc[a], wts[i * t.heads + h + a]);
            }
#pragma GCC unroll 16
            for (int g = 0; g < 4; ++g) {
                const int valid = bn - 16 * g;
                if (valid <= 0) break;
                _mm512_mask_storeu_ps(t.out + i * t.ldo + j0 + 16 * g, lane_mask(valid), round_bf16(total[g]));
            }
        }
    }
    if (configured) attn_amx_release();
}

}  // namespace deepinfer::backend::cpu::avx512
