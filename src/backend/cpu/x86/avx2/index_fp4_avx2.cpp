// Indexer scores from fp4 records on integer dot products (Kernels::index_scores_fp4; the byte forms: isa_ops.h),
// AVX2. Per block of 64 keys the records' codes become key bytes in dwords of 4 dims, transposed so that a register
// holds one dword of 8 keys. The plain form multiplies them with a query dword by vpmaddubsw (32
// products, summed in pairs to int16) and adds the pairs of a group of 32 dims up in int16 (at most 16 x 24 x 12 =
// 4608 in magnitude), then vpmaddwd makes each key's group sum an int32; the VNNI forms (fp4_chunk.h: AVX-VNNI, or
// EVEX on Cascade Lake / Ice Lake) add 32 products into int32 by one vpdpbusd. Each group sum is scaled into the
// fp32 dot product, groups in order: the same bits in every form. Against the bf16 index_scores' fp32 FMAs (8
// products each) that is about 2 operations per 32 products, or 1.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/avx2/fp4_chunk.h"
#include "backend/cpu/x86/avx2/vnni_dot.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

constexpr int kBlock = 64;  // keys per transposed block (the bf16 index_scores' block)

// Each dword of x (8 codes, two per byte, low nibble first) -> the key bytes of its codes 4 * half .. + 3.
inline __m256i expand_quad(__m256i x, int half) {
    // bytes (b, b, b', b') of the dword's byte pair, then the low nibble of the even bytes and the high one of the odd
    const __m256i first = _mm256_setr_epi8(0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9, 12, 12, 13, 13,  //
                                           0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9, 12, 12, 13, 13);
    const __m256i pick = half == 0 ? first : _mm256_add_epi8(first, _mm256_set1_epi8(2));
    const __m256i y = _mm256_shuffle_epi8(x, pick);
    const __m256i nibbles = _mm256_or_si256(_mm256_and_si256(y, _mm256_set1_epi16(0x000f)),
                                            _mm256_and_si256(_mm256_srli_epi16(y, 4), _mm256_set1_epi16(0x0f00)));
    const auto* biased = reinterpret_cast<const __m128i*>(tables::kE2M1Biased.v);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(biased));
    return _mm256_shuffle_epi8(table, nibbles);
}

// Up to 8 keys' records (keys >= valid read as code 0, scale 0) -> kt[c * kBlock + lane] = the key bytes of dims
// 4c..4c+3 of key `lane` (c < dim / 4), ks[g * kBlock + lane] = its group scale.
void prepare_keys(const uint8_t* const* records, int valid, int dim, uint32_t* kt, float* ks) {
    const int dwords = dim / 8;
    for (int d0 = 0; d0 < dwords; d0 += 8) {
        const int take = dwords - d0 < 8 ? dwords - d0 : 8;
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(take), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 r[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
            r[k] = k < valid ? _mm256_castsi256_ps(_mm256_maskload_epi32(
                                   reinterpret_cast<const int*>(records[k] + 4 * d0), mask))
                             : _mm256_setzero_ps();
        transpose8(r);  // r[c]: dword d0 + c (dims 8(d0 + c) .. + 7) of the 8 keys
        for (int c = 0; c < take; ++c) {
            auto* out = reinterpret_cast<__m256i*>(kt + static_cast<int64_t>(2 * (d0 + c)) * kBlock);
            _mm256_store_si256(out, expand_quad(_mm256_castps_si256(r[c]), 0));
            _mm256_store_si256(out + kBlock / 8, expand_quad(_mm256_castps_si256(r[c]), 1));
        }
    }
    for (int g = 0; g < dim / 32; ++g)
        for (int k = 0; k < 8; ++k) ks[g * kBlock + k] = k < valid ? e8m0_to_float(records[k][dim / 2 + g]) : 0.0f;
}

// The group sums (with the query's bias) of 4 x 8 keys: kc0, the keys' dwords of the group's first 4 dims (the next
// ones kBlock dwords on). VNNI forms: int32 sums from the bias; plain: int16 sums, widened and biased at the end.
template <class Form>
inline void group_sums(const __m256i* kc0, const uint8_t* q, int g, int32_t bias, __m256i (&group)[4]) {
    const __m256i bv = _mm256_set1_epi32(bias);
    __m256i acc[4];
    for (auto& v : acc) v = Form::kVnni ? bv : _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
        uint32_t quad;
        __builtin_memcpy(&quad, q + 4 * (8 * g + c), 4);
        const __m256i qv = _mm256_set1_epi32(static_cast<int>(quad));
        const __m256i* kc = kc0 + c * (kBlock / 8);
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
            const __m256i k = _mm256_load_si256(kc + s);
            if constexpr (Form::kVnni) {
                acc[s] = dpbusd<Form>(acc[s], k, qv);
            } else {
                acc[s] = _mm256_add_epi16(acc[s], _mm256_maddubs_epi16(k, qv));
                // (one running sum: GCC otherwise regroups the 8 additions into a tree whose partial products spill)
                __asm__("" : "+x"(acc[s]));
            }
        }
    }
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) group[s] = Form::kVnni ? acc[s] : _mm256_add_epi32(_mm256_madd_epi16(acc[s], ones), bv);
}

// dot[0..63] = the fp32 dot products of one prepared query head with the block's keys.
template <class Form>
void head_dots(const uint32_t* kt, const float* ks, const uint8_t* q, int dim, float* dot) {
    const int groups = dim / 32;
    for (int half = 0; half < 2; ++half) {  // keys 32 half .. + 31, as 4 registers of 8
        __m256 sums[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int g = 0; g < groups; ++g) {
            int32_t bias;
            float scale;
            __builtin_memcpy(&bias, q + dim + 4 * g, 4);
            __builtin_memcpy(&scale, q + dim + 4 * groups + 4 * g, 4);
            __m256i group[4];
            group_sums<Form>(reinterpret_cast<const __m256i*>(kt + static_cast<int64_t>(8 * g) * kBlock + 32 * half),
                             q, g, bias, group);
            const __m256 qs = _mm256_set1_ps(scale);
            // group sum x key scale x query scale / 4: an exact product (both scales powers of two) added in fp32
#pragma GCC unroll 4
            for (int s = 0; s < 4; ++s) {
                const __m256 scale_s = _mm256_mul_ps(_mm256_load_ps(ks + g * kBlock + 32 * half + 8 * s), qs);
                sums[s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group[s]), scale_s, sums[s]);
            }
        }
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) _mm256_store_ps(dot + 32 * half + 8 * s, sums[s]);
    }
}

template <class Form>
void scores(const IndexScoresFp4Task& t) {
    const int dim = t.dim;
    const size_t head_bytes = fp4_query_head_bytes(dim);
    uint8_t* mem = align64(t.scratch);
    auto* kt = reinterpret_cast<uint32_t*>(mem);                                           // [dim / 4][64]
    auto* ks = reinterpret_cast<float*>(mem + static_cast<size_t>(dim / 4) * kBlock * 4);  // [dim / 32][64]
    const auto* wts = reinterpret_cast<const uint16_t*>(t.w);
    alignas(32) float dot[kBlock];
    for (int64_t j0 = t.j0; j0 < t.j1; j0 += kBlock) {
        const int bn = t.j1 - j0 < kBlock ? static_cast<int>(t.j1 - j0) : kBlock;
        for (int s = 0; s < kBlock / 8; ++s) {
            const int valid = bn - 8 * s < 0 ? 0 : (bn - 8 * s > 8 ? 8 : bn - 8 * s);
            prepare_keys(t.keys + j0 + 8 * s, valid, dim, kt + 8 * s, ks + 8 * s);
        }
        for (int64_t i = t.i0; i < t.i1; ++i) {
            const uint8_t* qi = t.q + static_cast<size_t>(i) * t.heads * head_bytes;
            __m256 total[kBlock / 8];
            for (auto& v : total) v = _mm256_setzero_ps();
            for (int h = 0; h < t.heads; ++h) {  // heads in order
                head_dots<Form>(kt, ks, qi + h * head_bytes, dim, dot);
                add_head_scores(total, dot, wts[i * t.heads + h]);
            }
            store_head_scores(total, bn, t.out + i * t.ldo + j0);
        }
    }
}

}  // namespace

void index_scores_fp4(const IndexScoresFp4Task& t) {
    with_form([&](auto form) { scores<decltype(form)>(t); });
}

}  // namespace deepinfer::backend::cpu::avx2
