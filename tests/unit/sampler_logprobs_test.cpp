// Raw-logit logprobs: normalisation (sum of exp = 1), stability on large logits, hand-computed values,
// and the top-n ordering with ties by id.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sample/logprobs.h"

namespace deepinfer::sample {
namespace {

TEST(SamplerLogprobs, HandComputedValues) {
    // log-softmax of (0, ln 3): log(1/4), log(3/4).
    const std::vector<float> logits = {0.0f, static_cast<float>(std::log(3.0))};
    const Logprobs lp = log_softmax(logits);
    EXPECT_NEAR(lp.of(0), std::log(0.25), 1e-6);
    EXPECT_NEAR(lp.of(1), std::log(0.75), 1e-6);
}

TEST(SamplerLogprobs, SumToOneOnTheFullVocabulary) {
    std::mt19937 gen(5);
    std::normal_distribution<float> body(0.0f, 3.0f);
    std::vector<float> logits(129280);
    for (float& x : logits) x = body(gen);
    const Logprobs lp = log_softmax(logits);
    double total = 0.0;
    for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) total += std::exp(static_cast<double>(lp.of(i)));
    EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(SamplerLogprobs, StableForLargeLogitsAndMaskedEntries) {
    // exp(1000) overflows float and double; the max-shifted sum does not.
    const std::vector<float> logits = {1000.0f, 1000.0f, -std::numeric_limits<float>::infinity(), 999.0f};
    const Logprobs lp = log_softmax(logits);
    const double z = 2.0 + std::exp(-1.0);
    EXPECT_NEAR(lp.of(0), -std::log(z), 1e-6);
    EXPECT_NEAR(lp.of(3), -1.0 - std::log(z), 1e-6);
    EXPECT_EQ(lp.of(2), -std::numeric_limits<float>::infinity());
}

TEST(SamplerLogprobs, TopIsOrderedWithTiesById) {
    const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 2.0f};
    const Logprobs lp = log_softmax(logits);
    Scratch scratch;
    std::vector<std::pair<int32_t, float>> top;
    top_logprobs(lp, 4, top, scratch);
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0].first, 1);
    EXPECT_EQ(top[1].first, 3);
    EXPECT_EQ(top[2].first, 2);
    EXPECT_EQ(top[3].first, 5);
    for (const auto& [id, value] : top) EXPECT_EQ(value, lp.of(id));
    EXPECT_GT(top[1].second, top[2].second);

    top_logprobs(lp, 0, top, scratch);
    EXPECT_TRUE(top.empty());
    top_logprobs(lp, 20, top, scratch);  // more than the vocabulary: all of it
    ASSERT_EQ(top.size(), logits.size());
    EXPECT_EQ(top.back().first, 4);
}

}  // namespace
}  // namespace deepinfer::sample
