// AVX-512 act_quant (spec §4.2), bit-identical to the scalar reference: amax ignoring NaN as std::max
// does, the power-of-two scale from the bits of amax * fp32(1/448), x / s as a multiplication by the
// exact reciprocal, clamp keeping NaN, and e4m3 round-to-nearest-even (normal and subnormal paths).
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// |v| <= 448 or NaN -> e4m3 code, as numeric.cpp float_to_e4m3.
inline __m128i to_e4m3(__m512 v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80));
    const __m512i abs_bits = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    const __m512 a = _mm512_castsi512_ps(abs_bits);
    // normal: round the fp32 significand to 3 bits (nearest even); carries move into the exponent
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(abs_bits, 20), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_add_epi32(abs_bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7ffff)));
    __m512i code = _mm512_sub_epi32(_mm512_srli_epi32(rounded, 20), _mm512_set1_epi32(120 << 3));
    // subnormal (a < 2^-6): m = nearest-even integer of a * 2^9
    const __m512 scaled =
        _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(512.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 small = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.015625f), _CMP_LT_OQ);
    code = _mm512_mask_mov_epi32(code, small, _mm512_cvttps_epi32(scaled));
    code =
        _mm512_mask_mov_epi32(code, _mm512_cmp_ps_mask(a, _mm512_set1_ps(448.0f), _CMP_GE_OQ), _mm512_set1_epi32(0x7e));
    code = _mm512_or_si512(code, sign);
    code = _mm512_mask_mov_epi32(code, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7f));
    return _mm512_cvtepi32_epi8(code);
}

inline void quant_group(const uint16_t* x, uint8_t* codes, uint8_t* scale) {
    const __m512 x0 = from_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
    const __m512 x1 = from_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16)));
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x0), abs_mask));
    const __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x1), abs_mask));
    // max(value, running): a NaN value returns the running maximum, like std::max(amax, NaN)
    const __m512 m = _mm512_max_ps(a1, _mm512_max_ps(a0, _mm512_setzero_ps()));
    float amax = _mm512_reduce_max_ps(m);
    if (amax < 1e-4f) amax = 1e-4f;
    static const float kInv448 = 1.0f / 448.0f;
    uint32_t p;
    const float prod = amax * kInv448;
    __builtin_memcpy(&p, &prod, 4);
    const uint32_t b = ((p >> 23) & 0xffu) + ((p & 0x7fffffu) != 0 ? 1u : 0u);
    *scale = static_cast<uint8_t>(b);
    if (b == 255) {  // amax infinite: the scale is NaN and every code the NaN code
#pragma GCC unroll 16
        for (int j = 0; j < 32; ++j) codes[j] = 0x7f;
        return;
    }
    // 1 / 2^(b-127) = 2^(127-b) exactly (b >= 105 since amax >= 1e-4), so x * rcp rounds like x / s
    const uint32_t rcp_bits = b <= 253 ? (254u - b) << 23 : 0x00200000u;
    float rcp;
    __builtin_memcpy(&rcp, &rcp_bits, 4);
    const __m512 r = _mm512_set1_ps(rcp), hi = _mm512_set1_ps(448.0f), lo = _mm512_set1_ps(-448.0f);
    // min/max return the second operand on NaN: clamp keeps NaN as std::clamp does
    const __m512 v0 = _mm512_max_ps(lo, _mm512_min_ps(hi, _mm512_mul_ps(x0, r)));
    const __m512 v1 = _mm512_max_ps(lo, _mm512_min_ps(hi, _mm512_mul_ps(x1, r)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), to_e4m3(v0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16), to_e4m3(v1));
}

}  // namespace

void act_quant_rows(const bf16* x, int64_t k, uint8_t* codes, uint8_t* scales, int64_t r0, int64_t r1) {
    const auto* xs = reinterpret_cast<const uint16_t*>(x);
    const int64_t groups = k / 32;
    // The rows stream from memory in a prefill (2048 x 5120 bf16 = 20 MB a call): without the software
    // prefetch (2 KB ahead, into L1) half of this loop's samples waited on the loads of x, and act_quant took
    // 3.7% of a 4096-token prefill's samples; with it 1.6% (docs/PERFORMANCE.md, "Sixteenth session").
    for (int64_t i = r0; i < r1; ++i)
        for (int64_t g = 0; g < groups; ++g) {
            _mm_prefetch(reinterpret_cast<const char*>(xs + i * k + g * 32) + 2048, _MM_HINT_T0);
            quant_group(xs + i * k + g * 32, codes + i * k + g * 32, scales + i * groups + g);
        }
}

}  // namespace deepinfer::backend::cpu::avx512
