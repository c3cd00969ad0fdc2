// Exact scalar conversions for the formats of spec §3.2 / §4.2-§4.5.
#include "core/numeric.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace deepinfer {
namespace {

std::array<float, 256> make_e4m3_table() {
    std::array<float, 256> table{};
    for (int code = 0; code < 256; ++code) {
        int sign = code >> 7, exponent = (code >> 3) & 0xf, mantissa = code & 7;
        float v;
        if (exponent == 0xf && mantissa == 7) v = std::nanf("");
        else if (exponent == 0) v = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m * 2^-9
        else v = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
        table[code] = sign ? -v : v;
    }
    return table;
}
const std::array<float, 256> kE4M3Table = make_e4m3_table();

// |q| rounded to e2m1 (spec §4.4): the code's 3 magnitude bits and its value, nearest with ties to the even code
// (0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2.0, 2.5->2.0, 3.5->4.0, 5.0->4.0); a >= 6 gives 6, NaN gives 0. Branch-free
// (boundaries compared and counted), so that loops over it vectorize.
struct E2m1 {
    int code;
    float magnitude;
};
inline E2m1 e2m1_nearest(float a) {
    const int halves = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f);
    const int ones = (a > 2.5f) + (a >= 3.5f), twos = a > 5.0f;
    return {halves + ones + twos, 0.5f * static_cast<float>(halves) + static_cast<float>(ones) + 2.0f * twos};
}

// kN values q[i] = x[i] / s, each rounded to e2m1 (float_to_e2m1 of q clamped to [-6, 6]: e2m1_nearest of |q|, NaN a
// zero of its sign), to codes (when given) and to y[i] = bf16(value * s) (when given). Into local arrays, so that
// the compiler vectorizes it: the indexer queries' QDQ of a prefill
// went through float_to_e2m1 value by value (~3% of a 2048-token prefill, docs/PERFORMANCE.md). kPow2: s is a
// power of two whose inverse is exact, so x * (1 / s) is x / s exactly.
template <int kN, bool kPow2>
void e2m1_round_group(const float* x, float s, uint8_t* codes, float* y) {
    const float inv = 1.0f / s;
    uint8_t c[kN];
    float v[kN];
    for (int i = 0; i < kN; ++i) {
        const float q = kPow2 ? x[i] * inv : x[i] / s;
        const E2m1 e = e2m1_nearest(std::fabs(q));
        const uint32_t sign = std::bit_cast<uint32_t>(q) >> 31;
        c[i] = static_cast<uint8_t>(e.code + 8 * sign);
        v[i] = std::bit_cast<float>(std::bit_cast<uint32_t>(e.magnitude) | sign << 31) * s;
    }
    if (codes)
        for (int i = 0; i < kN; ++i) codes[i] = c[i];
    if (y)
        for (int i = 0; i < kN; ++i) y[i] = round_to_bf16(v[i]);
}

}  // namespace

float e4m3_to_float(uint8_t code) { return kE4M3Table[code]; }

uint8_t float_to_e4m3(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
    if (std::isnan(f)) return 0x7f;
    float a = std::fabs(f);
    if (a >= kE4M3Max) return sign | 0x7e;  // saturate (clamp before the cast, spec §4.5)
    uint32_t bits = std::bit_cast<uint32_t>(a);
    int exponent = static_cast<int>(bits >> 23) - 127;
    if (exponent < -6) {
        // Subnormal range of e4m3: value = m * 2^-9, m in [0, 8]; m = 8 is the smallest normal (code 8).
        // a * 2^9 is exact in fp32; round it to the nearest integer, ties to even.
        float scaled = a * 512.0f;
        float rounded = std::nearbyint(scaled);  // default rounding mode: nearest-even
        return sign | static_cast<uint8_t>(rounded);
    }
    // Normal: keep 3 mantissa bits of the fp32 significand, round to nearest even on the other 20.
    uint32_t mantissa = bits & 0x7fffffu;
    uint32_t keep = mantissa >> 20, rest = mantissa & 0xfffffu;
    const uint32_t half = 0x80000u;
    if (rest > half || (rest == half && (keep & 1u))) ++keep;
    if (keep == 8) {
        keep = 0;
        ++exponent;
    }
    // exponent <= 8 here; 448 = 2^8 * 1.75 is the largest finite, and values rounding past it were
    // already saturated above (anything >= 448 returns 0x7e; 2^8 * 1.875 would need a >= 464).
    return sign | static_cast<uint8_t>(((exponent + 7) << 3) | keep);
}

uint8_t float_to_e2m1(float f) {
    return static_cast<uint8_t>(e2m1_nearest(std::fabs(f)).code | (std::signbit(f) ? 8 : 0));
}

uint8_t act_quant_scale(float amax) {
    static const float kInv448 = 1.0f / 448.0f;  // fp32 constant, as the kernel's fp8_max_inv
    return round_scale_pow2_e8m0(std::max(amax, 1e-4f), kInv448);
}

uint8_t act_quant_group(const float* x, uint8_t* codes) {
    float amax = 0.0f;
    for (int i = 0; i < kActQuantGroup; ++i) amax = std::max(amax, std::fabs(x[i]));
    uint8_t scale = act_quant_scale(amax);
    float s = e8m0_to_float(scale);
    for (int i = 0; i < kActQuantGroup; ++i) codes[i] = float_to_e4m3(std::clamp(x[i] / s, -kE4M3Max, kE4M3Max));
    return scale;
}

void act_qdq_group(float* x) {
    uint8_t codes[kActQuantGroup];
    float s = e8m0_to_float(act_quant_group(x, codes));
    for (int i = 0; i < kActQuantGroup; ++i) x[i] = round_to_bf16(e4m3_to_float(codes[i]) * s);
}

uint8_t fp4_index_quant_group(const float* x, uint8_t* codes, float* y) {
    static const float kInv6 = 1.0f / 6.0f;
    static const float kFloor = 6.0f * std::ldexp(1.0f, -126);
    float amax = 0.0f;
    for (int i = 0; i < kFp4IndexGroup; ++i) amax = std::max(amax, std::fabs(x[i]));
    uint8_t scale = round_scale_pow2_e8m0(std::max(amax, kFloor), kInv6);
    float s = e8m0_to_float(scale);
    // s = 2^e with e in [-126, 127] (the floor), so 1 / s = 2^-e is exact (a subnormal at e = 127)
    e2m1_round_group<kFp4IndexGroup, true>(x, s, codes, y);
    return scale;
}

uint8_t fp4_kv_quant_group(const float* x, uint8_t* codes, float* y) {
    static const float kFloor = 6.0f * std::ldexp(1.0f, -9);
    float amax = 0.0f;
    for (int i = 0; i < kFp4KvGroup; ++i) amax = std::max(amax, std::fabs(x[i]));
    uint8_t scale = float_to_e4m3(std::max(amax, kFloor) / kE2M1Max);
    float s = e4m3_to_float(scale);
    e2m1_round_group<kFp4KvGroup, false>(x, s, codes, y);
    return scale;
}

}  // namespace deepinfer
