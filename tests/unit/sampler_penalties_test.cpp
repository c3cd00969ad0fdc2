// Penalties against hand-computed values (vLLM's apply_penalties), and suppression.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sample/penalties.h"

namespace deepinfer::sample {
namespace {

const float kNegInf = -std::numeric_limits<float>::infinity();

TEST(SamplerPenalties, AllThreeAgainstHandComputedValues) {
    // All values are exact in binary, so equality is exact.
    std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.0f, 4.0f};
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    const std::vector<int32_t> prompt = {0, 1, 1, 5};
    const std::vector<int32_t> output = {3, 4, 3};
    Scratch scratch;
    apply_penalties(logits, p, prompt, output, scratch);
    EXPECT_EQ(logits[0], 1.0f);    // prompt only, positive: 2 / 2 (once, not per occurrence)
    EXPECT_EQ(logits[1], -2.0f);   // prompt only (twice), negative: -1 * 2 once
    EXPECT_EQ(logits[2], 0.5f);    // unseen
    EXPECT_EQ(logits[3], 0.25f);   // output x2: 3 / 2 - 0.5 * 2 - 0.25
    EXPECT_EQ(logits[4], -4.75f);  // output x1: -2 * 2 - 0.5 * 1 - 0.25
    EXPECT_EQ(logits[5], 0.0f);    // prompt, zero: multiplied, stays 0
    EXPECT_EQ(logits[6], 4.0f);    // unseen
}

TEST(SamplerPenalties, PresenceAndFrequencyIgnoreThePrompt) {
    std::vector<float> logits = {1.0f, 1.0f, 1.0f};
    SamplingParams p;
    p.frequency_penalty = -1.0f;  // negative penalties encourage repetition
    p.presence_penalty = 1.5f;
    const std::vector<int32_t> prompt = {0, 0, 0};
    const std::vector<int32_t> output = {2, 2, 2, 2};
    Scratch scratch;
    apply_penalties(logits, p, prompt, output, scratch);
    EXPECT_EQ(logits[0], 1.0f);
    EXPECT_EQ(logits[1], 1.0f);
    EXPECT_EQ(logits[2], 1.0f + 4.0f - 1.5f);
}

TEST(SamplerPenalties, RepetitionBelowOneRewardsSeenTokens) {
    std::vector<float> logits = {3.0f, -3.0f};
    SamplingParams p;
    p.repetition_penalty = 0.5f;
    const std::vector<int32_t> output = {0, 1};
    Scratch scratch;
    apply_penalties(logits, p, {}, output, scratch);
    EXPECT_EQ(logits[0], 6.0f);
    EXPECT_EQ(logits[1], -1.5f);
}

TEST(SamplerPenalties, ScratchIsCleanForTheNextStep) {
    // Counts reset and epochs advance: a second call with other tokens sees none of the first call's.
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    p.frequency_penalty = 1.0f;
    Scratch scratch;
    std::vector<float> first = {2.0f, 2.0f, 2.0f};
    const std::vector<int32_t> out1 = {0, 0, 1};
    apply_penalties(first, p, {}, out1, scratch);
    EXPECT_EQ(first[0], -1.0f);  // 2 / 2 - 2
    EXPECT_EQ(first[1], 0.0f);   // 2 / 2 - 1
    std::vector<float> second = {2.0f, 2.0f, 2.0f};
    const std::vector<int32_t> out2 = {2};
    apply_penalties(second, p, {}, out2, scratch);
    EXPECT_EQ(second[0], 2.0f);
    EXPECT_EQ(second[1], 2.0f);
    EXPECT_EQ(second[2], 0.0f);  // 2 / 2 - 1, counted once
}

TEST(SamplerPenalties, NeutralParametersChangeNothing) {
    std::vector<float> logits = {0.3f, -7.0f, 11.0f};
    const std::vector<float> before = logits;
    const std::vector<int32_t> tokens = {0, 1, 2, 2};
    Scratch scratch;
    apply_penalties(logits, SamplingParams{}, tokens, tokens, scratch);
    EXPECT_EQ(logits, before);
}

TEST(SamplerPenalties, SuppressSetsMinusInfinity) {
    std::vector<float> logits = {1.0f, 2.0f, 3.0f};
    const std::vector<int32_t> ids = {2, 0};
    suppress_tokens(logits, ids);
    EXPECT_EQ(logits[0], kNegInf);
    EXPECT_EQ(logits[1], 2.0f);
    EXPECT_EQ(logits[2], kNegInf);
}

}  // namespace
}  // namespace deepinfer::sample
