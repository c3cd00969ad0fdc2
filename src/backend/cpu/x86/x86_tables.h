// Constant tables shared by the AVX2 and AVX-512 kernels: e4m3 -> bf16 bit patterns (split into high and
// low bytes for byte permutes), e2m1 -> bf16 / int8, e8m0 and e4m3 -> fp32. Plain arrays built at compile
// time (no member functions), so TUs built for different ISAs share nothing but data.
#pragma once

#include <bit>
#include <cstdint>

namespace deepinfer::backend::cpu::tables {

// e8m0 scale codes for which every nonzero e4m3 value (2^-9 .. 448) times 2^(code - 127) is a normal bf16 (2^-126 ..
// 1.75 x 2^127): the product's bf16 is then the value's bf16 with the exponent moved by code - 127, exactly (the
// records' and the Engram gather's fp8 unpack, rowwise_*.cpp).
inline constexpr uint8_t kPlainE8m0Min = 10, kPlainE8m0Max = 246;

// bf16 bits of the e4m3 magnitude code c (0..127); 0x7f is NaN. Normal codes map exponent e (bias 7)
// to e + 120 (bias 127) and shift the 3 mantissa bits up; subnormals m * 2^-9 are normal in bf16.
constexpr uint16_t e4m3_magnitude_bf16(int c) {
    const int e = c >> 3, m = c & 7;
    if (c == 0x7f) return 0x7fc0;
    if (e > 0) return static_cast<uint16_t>(((e + 120) << 7) | (m << 4));
    if (m == 0) return 0;
    // m * 2^-9 = 2^(p - 9) * (m / 2^p) with p = floor(log2 m): exponent p - 9, mantissa the bits below p
    const int p = m >= 4 ? 2 : (m >= 2 ? 1 : 0);
    return static_cast<uint16_t>(((p - 9 + 127) << 7) | ((m << (7 - p)) & 0x7f));
}

struct Bytes128 {
    alignas(64) uint8_t v[128];
};
struct Words32 {
    alignas(64) uint16_t v[32];
};
struct Floats256 {
    alignas(64) float v[256];
};

constexpr Bytes128 make_e4m3_bf16_bytes(bool high) {
    Bytes128 t{};
    for (int c = 0; c < 128; ++c)
        t.v[c] = static_cast<uint8_t>(high ? e4m3_magnitude_bf16(c) >> 8 : e4m3_magnitude_bf16(c) & 0xff);
    return t;
}
inline constexpr Bytes128 kE4M3Bf16Hi = make_e4m3_bf16_bytes(true);
inline constexpr Bytes128 kE4M3Bf16Lo = make_e4m3_bf16_bytes(false);
// ... of twice the magnitude (the exponent one up; zero and NaN as they are): the AMX fp8 decode's tables for an
// odd exponent offset (gemm_fp8_amx.cpp ScaledLookup).
constexpr Bytes128 make_e4m3_bf16_twice_bytes(bool high) {
    Bytes128 t{};
    for (int c = 0; c < 128; ++c) {
        const int w = e4m3_magnitude_bf16(c) + (c == 0 || c == 0x7f ? 0 : 0x80);
        t.v[c] = static_cast<uint8_t>(high ? w >> 8 : w & 0xff);
    }
    return t;
}
inline constexpr Bytes128 kE4M3Bf16TwiceHi = make_e4m3_bf16_twice_bytes(true);
inline constexpr Bytes128 kE4M3Bf16TwiceLo = make_e4m3_bf16_twice_bytes(false);

// e2m1 code (sign in bit 3) -> bf16 bits, repeated so a 5-bit index (a nibble plus one stray bit) works.
constexpr Words32 make_e2m1_bf16() {
    constexpr uint16_t magnitude[8] = {0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0};
    Words32 t{};
    for (int i = 0; i < 32; ++i) t.v[i] = static_cast<uint16_t>(magnitude[i & 7] | ((i & 8) ? 0x8000 : 0));
    return t;
}
inline constexpr Words32 kE2M1Bf16x2 = make_e2m1_bf16();

// e2m1 code -> 2 * value as int8 (exact integers in [-12, 12]).
struct Int8x16 {
    alignas(16) int8_t v[16];
};
inline constexpr Int8x16 kE2M1Twice = {{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}};

// e2m1 code -> 2 * value + 12 as uint8 (0..24): the unsigned operand of the AVX2 integer MXFP4 GEMV
// (gemv_fp4_int_avx2.cpp), which takes the 12 back out once per block.
struct Uint8x16 {
    alignas(16) uint8_t v[16];
};
inline constexpr int kE2M1Bias = 12;
constexpr Uint8x16 make_e2m1_biased() {
    Uint8x16 t{};
    for (int i = 0; i < 16; ++i) t.v[i] = static_cast<uint8_t>(kE2M1Twice.v[i] + kE2M1Bias);
    return t;
}
inline constexpr Uint8x16 kE2M1Biased = make_e2m1_biased();

// e8m0 byte -> fp32 (2^(b-127); 0 is the subnormal 2^-127, 255 is NaN), as numeric.h e8m0_to_float.
constexpr Floats256 make_e8m0() {
    Floats256 t{};
    for (int b = 0; b < 256; ++b) {
        uint32_t bits = static_cast<uint32_t>(b) << 23;
        if (b == 0) bits = 0x00400000u;
        if (b == 255) bits = 0x7fc00000u;
        t.v[b] = std::bit_cast<float>(bits);
    }
    return t;
}
inline constexpr Floats256 kE8M0 = make_e8m0();

// e4m3 code -> fp32, as numeric.h e4m3_to_float.
constexpr Floats256 make_e4m3() {
    Floats256 t{};
    for (int c = 0; c < 256; ++c) {
        const uint32_t bits = static_cast<uint32_t>(e4m3_magnitude_bf16(c & 0x7f)) << 16;
        t.v[c] = std::bit_cast<float>(bits | ((c & 0x80) ? 0x80000000u : 0u));
    }
    return t;
}
inline constexpr Floats256 kE4M3 = make_e4m3();

}  // namespace deepinfer::backend::cpu::tables
