// The emulated AVX-512 intrinsics (src/backend/cpu/x86/avx512/emulated_avx512.h) behave as the instructions
// do where the kernels depend on it: the emulated build (preset avx512emu) checks the AVX-512 kernels through
// them, so a shim that rounded, ordered or faulted differently would pass or fail those tests for the wrong
// reason. Built in every configuration (the header needs only SIMDe and AVX2).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstring>

#include "backend/cpu/x86/avx512/emulated_avx512.h"

namespace {

uint16_t bf16_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
}

__m512bh pairs(uint16_t even, uint16_t odd) {
    return (__m512bh)_mm512_set1_epi32(static_cast<int>(even | (static_cast<uint32_t>(odd) << 16)));
}

float lane0(__m512 v) {
    float out[16];
    _mm512_storeu_ps(out, v);
    return out[0];
}

// vdpbf16ps adds the odd pair's product first, then the even pair's, rounding each sum: 1 + (-1) + 2^-30 is
// 2^-30; the even product first would lose it (1 + 2^-30 rounds to 1).
TEST(EmulatedAvx512, DpBf16AddsTheOddProductFirst) {
    const __m512bh a = pairs(bf16_bits(0x1p-15f), bf16_bits(-1.0f));
    const __m512bh b = pairs(bf16_bits(0x1p-15f), bf16_bits(1.0f));
    EXPECT_EQ(lane0(_mm512_dpbf16_ps(_mm512_set1_ps(1.0f), a, b)), 0x1p-30f);
}

// Denormal inputs read as zero, denormal results flush to zero.
TEST(EmulatedAvx512, DpBf16FlushesDenormals) {
    const __m512bh denormal = pairs(0x0001, 0x0000), one = pairs(bf16_bits(1.0f), 0);
    EXPECT_EQ(lane0(_mm512_dpbf16_ps(_mm512_set1_ps(1.0f), denormal, one)), 1.0f);
    EXPECT_EQ(lane0(_mm512_dpbf16_ps(_mm512_set1_ps(0.0f), pairs(0x0001, 0), pairs(bf16_bits(0x1p100f), 0))), 0.0f);
    const __m512bh tiny = pairs(bf16_bits(0x1p-70f), 0), tinier = pairs(bf16_bits(0x1p-70f), 0);
    EXPECT_EQ(lane0(_mm512_dpbf16_ps(_mm512_set1_ps(0.0f), tiny, tinier)), 0.0f);  // 2^-140 flushed
}

// Masked loads and stores touch only the selected elements: a load whose masked-off lanes lie in an
// inaccessible page does not fault, a store leaves the unselected elements as they were.
TEST(EmulatedAvx512, MaskedAccessTouchesOnlySelectedElements) {
    const long page = sysconf(_SC_PAGESIZE);
    auto* mem = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mem, MAP_FAILED);
    ASSERT_EQ(mprotect(mem + page, page, PROT_NONE), 0);
    auto* last4 = reinterpret_cast<float*>(mem + page) - 4;
    for (int i = 0; i < 4; ++i) last4[i] = static_cast<float>(i + 1);
    float got[16];
    _mm512_storeu_ps(got, _mm512_maskz_loadu_ps(0x000f, last4));
    for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], i < 4 ? static_cast<float>(i + 1) : 0.0f) << i;
    _mm512_mask_storeu_ps(last4, 0x0005, _mm512_set1_ps(-7.0f));
    EXPECT_EQ(last4[0], -7.0f);
    EXPECT_EQ(last4[1], 2.0f);
    EXPECT_EQ(last4[2], -7.0f);
    EXPECT_EQ(last4[3], 4.0f);
    const auto* last2 = reinterpret_cast<const uint16_t*>(mem + page) - 2;
    uint16_t words[16];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words), _mm256_maskz_loadu_epi16(0x0002, last2));
    EXPECT_EQ(words[1], last2[1]);
    EXPECT_EQ(words[0], 0);
    munmap(mem, 2 * page);
}

// vcvttps2dq truncates and gives INT_MIN for NaN and out-of-range values.
TEST(EmulatedAvx512, ConvertWithTruncation) {
    const float in[16] = {-2.5f, 2.5f, NAN, 3e9f, -3e9f, 2147483520.0f, -2147483648.0f, 0.0f};
    int32_t out[16];
    _mm512_storeu_si512(out, _mm512_cvttps_epi32(_mm512_loadu_ps(in)));
    const int32_t want[8] = {-2, 2, INT_MIN, INT_MIN, INT_MIN, 2147483520, INT_MIN, 0};
    for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

// _mm512_reduce_add_ps adds as GCC's avx512fintrin.h does: the upper 8 lanes onto the lower, then 4 onto 4, then
// lanes 0 + 2 and 1 + 3, then those two. 2^24 + 1 (lanes 0, 8) rounds to 2^24 before lane 4's -2^24 cancels it;
// left to right the sum would be 1.
TEST(EmulatedAvx512, ReduceAddInGccOrder) {
    float in[16] = {};
    in[0] = 0x1p24f;
    in[8] = 1.0f;
    in[4] = -0x1p24f;
    EXPECT_EQ(_mm512_reduce_add_ps(_mm512_loadu_ps(in)), 0.0f);
    for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(i);
    EXPECT_EQ(_mm512_reduce_add_ps(_mm512_loadu_ps(in)), 120.0f);
    EXPECT_EQ(_mm512_reduce_max_ps(_mm512_loadu_ps(in)), 15.0f);
}

}  // namespace
