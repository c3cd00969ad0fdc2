// The sampler's building blocks: the vectorisable exp against std::exp, the double sums and max, and
// kth_largest against a full sort.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "sample/select.h"
#include "sample/vec_math.h"

namespace deepinfer::sample {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

TEST(SamplerMath, ExpNonpositiveIsAccurateOverItsRange) {
    // Every 61st float in [-87, 0] (about 18 million), relative to double exp.
    double worst = 0.0;
    for (uint32_t bits = 0x80000000u;; bits += 61) {
        const float x = std::bit_cast<float>(bits);
        if (x < -87.0f) break;
        const double ref = std::exp(static_cast<double>(x));
        worst = std::max(worst, std::fabs(exp_nonpositive(x) - ref) / ref);
    }
    EXPECT_LT(worst, 1e-7);
    EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
    EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
}

TEST(SamplerMath, ExpNonpositiveMapsTheEndsToZero) {
    EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
    EXPECT_EQ(exp_nonpositive(std::nanf("")), 0.0f);
    EXPECT_EQ(exp_nonpositive(-88.0f), 0.0f);
    EXPECT_EQ(exp_nonpositive(-1e30f), 0.0f);
    EXPECT_GT(exp_nonpositive(-87.0f), 0.0f);
}

TEST(SamplerMath, SumsAndMaxMatchSerialLoops) {
    std::mt19937 gen(8);
    std::uniform_real_distribution<float> dist(-30.0f, 0.0f);
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 1000u, 129280u}) {
        std::vector<float> values(n);
        for (float& x : values) x = dist(gen);
        double sum = 0.0, sum_exp = 0.0;
        float m = -kInf;
        for (float x : values) {
            sum += x;
            sum_exp += std::exp(static_cast<double>(x) - (-1.0));
            m = std::max(m, x);
        }
        EXPECT_NEAR(sum_double(values), sum, 1e-9 * std::max(1.0, std::fabs(sum))) << n;
        EXPECT_NEAR(sum_exp_double(values, -1.0f), sum_exp, 2e-7 * std::max(1.0, sum_exp)) << n;
        EXPECT_EQ(max_value(values), m) << n;
    }
    EXPECT_EQ(max_value(std::vector<float>{std::nanf(""), -3.0f, std::nanf("")}), -3.0f);
}

TEST(SamplerMath, KthLargestMatchesAFullSort) {
    std::mt19937 gen(21);
    std::vector<float> buffer;
    for (size_t n : {1u, 5u, 16u, 100u, 4096u, 129280u}) {
        // Coarse values so ties are frequent; a few -inf.
        std::vector<float> values(n);
        for (float& x : values) x = static_cast<float>(static_cast<int>(gen() % 200) - 100) * 0.25f;
        for (size_t i = 0; i < n / 50; ++i) values[gen() % n] = -kInf;
        std::vector<float> sorted = values;
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        for (size_t k : {size_t{1}, size_t{2}, n / 16, n / 16 + 1, n / 2, n}) {
            if (k < 1 || k > n) continue;
            EXPECT_EQ(kth_largest(values, k, buffer), sorted[k - 1]) << "n=" << n << " k=" << k;
        }
    }
}

}  // namespace
}  // namespace deepinfer::sample
