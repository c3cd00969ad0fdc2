// AVX2 act_quant (spec §4.2), bit-identical to the scalar reference; same steps as the AVX-512 version
// (quant_avx512.cpp) with 8 lanes and blends in place of masks.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// |v| <= 448 or NaN -> e4m3 code in 32-bit lanes, as numeric.cpp float_to_e4m3.
inline __m256i to_e4m3(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
    const __m256i abs_bits = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    const __m256 a = _mm256_castsi256_ps(abs_bits);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(abs_bits, 20), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(abs_bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7ffff)));
    __m256i code = _mm256_sub_epi32(_mm256_srli_epi32(rounded, 20), _mm256_set1_epi32(120 << 3));
    const __m256 scaled =
        _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(512.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i small = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(0.015625f), _CMP_LT_OQ));
    code = _mm256_blendv_epi8(code, _mm256_cvttps_epi32(scaled), small);
    const __m256i big = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(448.0f), _CMP_GE_OQ));
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7e), big);
    code = _mm256_or_si256(code, sign);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), nan);
}

inline void quant_group(const uint16_t* x, uint8_t* codes, uint8_t* scale) {
    __m256 xv[4];
#pragma GCC unroll 16
    for (int j = 0; j < 4; ++j) xv[j] = load_bf16(x + 8 * j);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    // max(value, running): a NaN value returns the running maximum, like std::max(amax, NaN)
    __m256 m = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int j = 0; j < 4; ++j) m = _mm256_max_ps(_mm256_and_ps(xv[j], abs_mask), m);
    float amax = hmax(m);
    if (amax < 1e-4f) amax = 1e-4f;
    static const float kInv448 = 1.0f / 448.0f;
    const float prod = amax * kInv448;
    uint32_t p;
    __builtin_memcpy(&p, &prod, 4);
    const uint32_t b = ((p >> 23) & 0xffu) + ((p & 0x7fffffu) != 0 ? 1u : 0u);
    *scale = static_cast<uint8_t>(b);
    if (b == 255) {  // amax infinite: the scale is NaN and every code the NaN code
#pragma GCC unroll 16
        for (int j = 0; j < 32; ++j) codes[j] = 0x7f;
        return;
    }
    const uint32_t rcp_bits = b <= 253 ? (254u - b) << 23 : 0x00200000u;  // exact 1 / s
    float rcp;
    __builtin_memcpy(&rcp, &rcp_bits, 4);
    const __m256 r = _mm256_set1_ps(rcp), hi = _mm256_set1_ps(448.0f), lo = _mm256_set1_ps(-448.0f);
    __m256i c[4];
#pragma GCC unroll 16
    for (int j = 0; j < 4; ++j) c[j] = to_e4m3(_mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_mul_ps(xv[j], r))));
    const __m256i words = _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), ordered);
}

}  // namespace

void act_quant_rows(const bf16* x, int64_t k, uint8_t* codes, uint8_t* scales, int64_t r0, int64_t r1) {
    const auto* xs = reinterpret_cast<const uint16_t*>(x);
    const int64_t groups = k / 32;
    // rows prefetched 2 KB ahead, as in the AVX-512 act_quant (a prefill's rows stream from memory)
    for (int64_t i = r0; i < r1; ++i)
        for (int64_t g = 0; g < groups; ++g) {
            _mm_prefetch(reinterpret_cast<const char*>(xs + i * k + g * 32) + 2048, _MM_HINT_T0);
            quant_group(xs + i * k + g * 32, codes + i * k + g * 32, scales + i * groups + g);
        }
}

}  // namespace deepinfer::backend::cpu::avx2
