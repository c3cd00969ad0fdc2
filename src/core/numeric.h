// Numeric formats of spec §3.2 and §4.2-§4.5: bf16 (RNE), fp8 e4m3fn (RNE, saturating at ±448), e8m0
// power-of-two scales, e2m1 (MXFP4 nibbles), the power-of-two scale rule of act_quant and the two fp4
// QDQ variants. Scalar and exact: these are the definition the SIMD kernels are tested against.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace deepinfer {

// ---- bf16 -------------------------------------------------------------------------------------------

// bf16 stored as its raw bits; arithmetic is always done in fp32.
struct bf16 {
    uint16_t bits;
};
static_assert(sizeof(bf16) == 2);

inline float bf16_to_float(bf16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }

// Round-to-nearest-even; NaN stays a (quiet) NaN, overflow rounds to infinity as torch does.
inline bf16 float_to_bf16(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{static_cast<uint16_t>(u >> 16)};
}

// fp32 -> nearest bf16 value, returned as fp32.
inline float round_to_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

// ---- fp8 e4m3fn ------------------------------------------------------------------------------------

inline constexpr float kE4M3Max = 448.0f;

// Decode one e4m3fn code (0x7f / 0xff are NaN).
float e4m3_to_float(uint8_t code);
// fp32 -> e4m3fn code: clamp to ±448, then round to nearest even (the reference's "satfinite" cast).
// NaN maps to the NaN code 0x7f.
uint8_t float_to_e4m3(float f);

// ---- e8m0 scales -----------------------------------------------------------------------------------

// byte b means 2^(b-127); 255 is NaN.
inline float e8m0_to_float(uint8_t b) {
    if (b == 255) return std::nanf("");
    if (b == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127 is an fp32 subnormal
    return std::bit_cast<float>(static_cast<uint32_t>(b) << 23);
}

// 2^ceil(log2(a * max_inv)) as an e8m0 byte, computed like the kernels' fast_round_scale: the fp32 product
// p = a * max_inv, then its biased exponent plus one when any mantissa bit is set (spec §4.2 step 2).
inline uint8_t round_scale_pow2_e8m0(float amax, float max_inv) {
    uint32_t bits = std::bit_cast<uint32_t>(amax * max_inv);
    uint32_t exponent = (bits >> 23) & 0xffu;
    uint32_t mantissa = bits & 0x7fffffu;
    return static_cast<uint8_t>(exponent + (mantissa != 0 ? 1u : 0u));
}

// ---- e2m1 (fp4) ------------------------------------------------------------------------------------

inline constexpr float kE2M1Max = 6.0f;
// Magnitudes by 3-bit code.
inline constexpr float kE2M1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// 4-bit code (bit 3 = sign) -> value.
inline float e2m1_to_float(uint8_t code) {
    float v = kE2M1Values[code & 7];
    return (code & 8) ? -v : v;
}
// fp32 (already clamped to [-6, 6]) -> 4-bit code, nearest with ties to the even code (spec §4.4):
// 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2.0, 2.5->2.0, 3.5->4.0, 5.0->4.0. The sign of zero is kept.
uint8_t float_to_e2m1(float f);

// ---- activation / cache quantizers (per group) -----------------------------------------------------

inline constexpr int kActQuantGroup = 32;     // act_quant: fp8 per 1x32 (spec §4.2)
inline constexpr int kFp4IndexGroup = 32;     // index keys / queries: e2m1 + e8m0 per 32 (spec §4.4)
inline constexpr int kFp4KvGroup = 16;        // compressed KV: e2m1 + e4m3 per 16 (spec §4.4)

// act_quant scale of one group: amax floored at 1e-4, 2^ceil(log2(amax/448)) as e8m0.
uint8_t act_quant_scale(float amax);
// Quantize one group of 32 fp32 values (bf16-representable) to e4m3 codes with a power-of-two scale.
// Returns the e8m0 scale byte.
uint8_t act_quant_group(const float* x, uint8_t* codes);
// QDQ one group of 32 in place: bf16(e4m3(x/s) * s) (the window-KV "in-place" act_quant, spec §5.3.2).
void act_qdq_group(float* x);

// Index-key / index-query fp4 QDQ of one group of 32 (power-of-two scale, amax floor 6*2^-126).
// codes may be null; scale is the e8m0 byte. y receives bf16(e2m1 * s).
uint8_t fp4_index_quant_group(const float* x, uint8_t* codes, float* y);
// Compressed-KV fp4 QDQ of one group of 16 (e4m3 scale = e4m3(max(amax, 6*2^-9) / 6)).
// codes may be null; returns the e4m3 scale code. y receives bf16(e2m1 * s).
uint8_t fp4_kv_quant_group(const float* x, uint8_t* codes, float* y);

}  // namespace deepinfer
