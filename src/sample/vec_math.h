// Vocabulary-wide float loops written so that GCC vectorises them at the baseline ISA (AVX2): exp of
// non-positive arguments, max and double-accumulated sums. glibc's scalar expf and a single serial double
// accumulator each cost ~3 ns per entry, i.e. ~0.4 ms per pass over the 129,280-token vocabulary.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

namespace deepinfer::sample {

// exp(x) for x <= 0, the shifted logits x - max of a softmax. Relative error < 1e-7 for x >= -87 (8.1e-8
// at worst over every float in [-87, 0] against double std::exp; sampled in sampler_math_test). -inf, NaN
// and x <= -88 give 0; just above -88 results may be subnormal. Cephes expf: x = n ln2 + r with
// |r| <= ln2 / 2 (Cody-Waite split of ln2), a degree-7 polynomial for e^r, 2^n from exponent bits.
// Branch-free, so loops calling it vectorise.
inline float exp_nonpositive(float x) {
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kLn2Hi = 0.693359375f;       // exact in 9 bits: n * kLn2Hi is exact
    constexpr float kLn2Lo = -2.12194440e-4f;
    constexpr float kRound = 12582912.0f;        // 1.5 * 2^23: adding and subtracting it rounds to integer
    x = x > -88.0f ? x : -88.0f;                 // also maps NaN and -inf to -88 (whose result is 0)
    const float n = (x * kLog2e + kRound) - kRound;
    const float r = (x - n * kLn2Hi) - n * kLn2Lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    // n in [-127, 0]; n = -127 gives exponent bits 0, i.e. a scale of exactly 0.
    const int32_t biased = static_cast<int32_t>(n) + 127;
    return p * std::bit_cast<float>(static_cast<uint32_t>(biased) << 23);
}

// Largest non-NaN value; -inf when there is none.
float max_value(std::span<const float> values);

// Sum in double over 8 interleaved partial sums (fixed order, so the result is deterministic).
double sum_double(std::span<const float> values);

// sum_double of exp_nonpositive(values[i] - shift).
double sum_exp_double(std::span<const float> values, float shift);

}  // namespace deepinfer::sample
