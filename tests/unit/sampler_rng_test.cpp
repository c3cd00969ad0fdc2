// RequestRng: Philox4x32-10 against the Random123 known-answer vectors, purity of (seed, stream, step, k)
// draws, and the sequential interface agreeing with the indexed one.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "sample/request_rng.h"

namespace deepinfer::sample {
namespace {

// Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter[4], key[2] -> output[4].
TEST(SamplerRng, PhiloxKnownAnswers) {
    EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
              (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
    EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
              (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
    EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
              (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(SamplerRng, DrawIsAPureFunctionOfSeedStreamStepAndK) {
    const RequestRng a(1234), b(1234);
    // Query in different orders and interleaved with another request: the answers do not move.
    const RequestRng other(99);
    std::vector<double> forward, backward;
    for (uint64_t s = 0; s < 50; ++s) {
        forward.push_back(a.uniform_at(s, 0));
        (void)other.uniform_at(s, 0);
    }
    for (uint64_t s = 50; s-- > 0;) backward.push_back(b.uniform_at(s, 0));
    for (size_t i = 0; i < 50; ++i) EXPECT_EQ(forward[i], backward[49 - i]);
}

TEST(SamplerRng, SequentialDrawsMatchIndexedDraws) {
    RequestRng rng(7, 3);
    rng.set_step(41);
    for (uint32_t k = 0; k < 5; ++k) EXPECT_EQ(rng.uniform(), rng.uniform_at(41, k));
    rng.set_step(42);
    EXPECT_EQ(rng.uniform(), rng.uniform_at(42, 0));
}

TEST(SamplerRng, SeedsStreamsStepsAndDrawsAreDistinct) {
    // Each coordinate changes the draw; in particular stream 1 of seed s is not stream 0 of seed s + 1
    // (vLLM's "seed + index" would make them equal).
    const double base = RequestRng(10, 1).uniform_at(5, 0);
    EXPECT_NE(base, RequestRng(11, 0).uniform_at(5, 0));
    EXPECT_NE(base, RequestRng(10, 0).uniform_at(5, 0));
    EXPECT_NE(base, RequestRng(10, 1).uniform_at(6, 0));
    EXPECT_NE(base, RequestRng(10, 1).uniform_at(5, 1));
    EXPECT_NE(base, RequestRng(10 + (1ull << 32), 1).uniform_at(5, 0));  // high seed bits matter
    EXPECT_NE(base, RequestRng(10, 1).uniform_at(5 + (1ull << 32), 0));  // high step bits matter
}

TEST(SamplerRng, UniformsAreInRangeAndEvenlySpread) {
    // 100,000 draws into 10 bins: each bin within 5% of 10,000 (a binomial sd is 95; 500 is > 5 sd).
    const RequestRng rng(2024);
    std::array<int, 10> bins{};
    double sum = 0.0;
    for (uint64_t s = 0; s < 100000; ++s) {
        const double u = rng.uniform_at(s, 0);
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        ++bins[static_cast<size_t>(u * 10)];
        sum += u;
    }
    for (int count : bins) EXPECT_NEAR(count, 10000, 500);
    EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(SamplerRng, UnseededRequestsGetDifferentSeeds) {
    std::set<uint64_t> seeds;
    for (int i = 0; i < 8; ++i) seeds.insert(RequestRng::from_seed(std::nullopt).seed());
    EXPECT_EQ(seeds.size(), 8u);
    EXPECT_EQ(RequestRng::from_seed(77, 2).seed(), 77u);
    EXPECT_EQ(RequestRng::from_seed(77, 2).stream(), 2u);
}

}  // namespace
}  // namespace deepinfer::sample
