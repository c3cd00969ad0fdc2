// sample_token end to end: greedy, sampled frequencies against the distribution (chi-square with a fixed
// seed, so deterministic), reproducibility by seed whatever the call pattern, min_tokens, and logprobs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "sample/sampler.h"

namespace deepinfer::sample {
namespace {

// Pearson's statistic of observed counts against expected probabilities (bins with probability 0 must be
// empty: a hit there is a bug and returns infinity).
double chi_square(const std::vector<int>& counts, const std::vector<float>& probs, int draws) {
    double stat = 0.0;
    for (size_t i = 0; i < counts.size(); ++i) {
        const double expected = static_cast<double>(probs[i]) * draws;
        if (expected == 0.0) {
            if (counts[i] != 0) return INFINITY;
            continue;
        }
        stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    return stat;
}

// 7 degrees of freedom: P(chi2 > 50) is about 1e-8, so a correct sampler passes; a sampler off by one bin,
// or drawing from the wrong temperature, lands in the thousands. The seed is fixed: no flakes.
constexpr double kChiSquareBound7 = 50.0;
const std::vector<float> kLogits8 = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, -2.5f};

TEST(SamplerSample, GreedyPicksTheArgmax) {
    SamplingParams p;
    p.temperature = 0.0f;
    Scratch scratch;
    RequestRng rng(1);
    for (uint64_t step = 0; step < 5; ++step) {
        const std::vector<int32_t> output(step, 7);
        EXPECT_EQ(sample_token(kLogits8, p, {}, output, {}, rng, scratch).token, 2);
    }
}

TEST(SamplerSample, FrequenciesMatchTheSoftmaxAcrossStreams) {
    // One draw per completion stream (step 0), through the full sample_token path.
    SamplingParams p;
    std::vector<float> probs = kLogits8;
    to_probabilities(probs, p);
    constexpr int kDraws = 80000;
    std::vector<int> counts(kLogits8.size(), 0);
    Scratch scratch;
    for (uint32_t stream = 0; stream < kDraws; ++stream) {
        RequestRng rng(20240611, stream);
        ++counts[static_cast<size_t>(sample_token(kLogits8, p, {}, {}, {}, rng, scratch).token)];
    }
    EXPECT_LT(chi_square(counts, probs, kDraws), kChiSquareBound7);
}

TEST(SamplerSample, FrequenciesMatchTheFilteredDistributionAcrossSteps) {
    // Temperature 0.7 + top-k 6 + top-p 0.97: successive steps of one seed follow to_probabilities, and
    // never leave its support.
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_k = 6;
    p.top_p = 0.97f;
    std::vector<float> probs = kLogits8;
    to_probabilities(probs, p);
    int support = 0;
    for (float q : probs) support += q > 0.0f;
    ASSERT_GE(support, 4);  // the filters leave something to test
    ASSERT_LT(support, 8);

    constexpr int kDraws = 80000;
    std::vector<int> counts(kLogits8.size(), 0);
    const RequestRng rng(99);
    for (uint64_t step = 0; step < kDraws; ++step)
        ++counts[static_cast<size_t>(sample_from(probs, rng.uniform_at(step, 0)))];
    // Fewer than 8 bins: fewer degrees of freedom put the same bound even further into the tail.
    EXPECT_LT(chi_square(counts, probs, kDraws), kChiSquareBound7);
}

TEST(SamplerSample, ChiSquareDetectsTheWrongDistribution) {
    // The statistic has power: draws at temperature 1 tested against the temperature-0.8 distribution fail.
    SamplingParams hot, cool;
    cool.temperature = 0.8f;
    std::vector<float> probs_hot = kLogits8, probs_cool = kLogits8;
    to_probabilities(probs_hot, hot);
    to_probabilities(probs_cool, cool);
    constexpr int kDraws = 80000;
    std::vector<int> counts(kLogits8.size(), 0);
    const RequestRng rng(3);
    for (uint64_t step = 0; step < kDraws; ++step)
        ++counts[static_cast<size_t>(sample_from(probs_hot, rng.uniform_at(step, 0)))];
    EXPECT_LT(chi_square(counts, probs_hot, kDraws), kChiSquareBound7);
    EXPECT_GT(chi_square(counts, probs_cool, kDraws), 10 * kChiSquareBound7);
}

// Generates n tokens autoregressively over fixed-but-step-dependent logits, with repetition penalty on.
std::vector<int32_t> generate(uint64_t seed, int n, Scratch& scratch) {
    SamplingParams p;
    p.temperature = 1.3f;
    p.repetition_penalty = 1.2f;
    std::vector<float> logits(64);
    const std::vector<int32_t> prompt = {3, 4, 5};
    std::vector<int32_t> output;
    RequestRng rng(seed);
    for (int i = 0; i < n; ++i) {
        for (size_t v = 0; v < logits.size(); ++v) logits[v] = static_cast<float>(std::sin(0.37 * v + 0.11 * i));
        output.push_back(sample_token(logits, p, prompt, output, {}, rng, scratch).token);
    }
    return output;
}

TEST(SamplerSample, SameSeedSameTokensDifferentSeedDifferentTokens) {
    Scratch a, b;
    const auto first = generate(42, 40, a);
    // Interleave another request's work on the shared scratch between steps of a fresh run: no effect.
    (void)generate(7, 5, b);
    const auto again = generate(42, 40, b);
    EXPECT_EQ(first, again);
    EXPECT_NE(first, generate(43, 40, a));
    EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 5u);  // actually random, not stuck
}

TEST(SamplerSample, StepIsTheOutputPositionNotTheCallCount) {
    // Resuming after preemption (a fresh RequestRng, the same output so far) gives the same next token as
    // the uninterrupted run: the draw depends on (seed, output length), not on how many calls came before.
    SamplingParams p;
    Scratch scratch;
    const std::vector<int32_t> output = {1, 2, 3, 4, 5, 6};
    RequestRng warm(5);
    for (int i = 0; i < 10; ++i) (void)warm.uniform();  // unrelated sequential use
    const int32_t continued = sample_token(kLogits8, p, {}, output, {}, warm, scratch).token;
    RequestRng fresh(5);
    EXPECT_EQ(sample_token(kLogits8, p, {}, output, {}, fresh, scratch).token, continued);
    EXPECT_EQ(continued, sample_from([&] {
                  std::vector<float> probs = kLogits8;
                  to_probabilities(probs, p);
                  return probs;
              }(), RequestRng(5).uniform_at(output.size(), 0)));
}

TEST(SamplerSample, MinTokensSuppressesStopIdsUntilReached) {
    // Token 2 dominates; as the stop id it is suppressed while fewer than min_tokens were generated.
    SamplingParams p;
    p.temperature = 0.0f;
    p.min_tokens = 3;
    const std::vector<int32_t> stop = {2};
    Scratch scratch;
    RequestRng rng(0);
    EXPECT_EQ(sample_token(kLogits8, p, {}, std::vector<int32_t>{}, stop, rng, scratch).token, 4);
    EXPECT_EQ(sample_token(kLogits8, p, {}, std::vector<int32_t>{0, 0}, stop, rng, scratch).token, 4);
    EXPECT_EQ(sample_token(kLogits8, p, {}, std::vector<int32_t>{0, 0, 0}, stop, rng, scratch).token, 2);
}

TEST(SamplerSample, PenaltiesChangeTheChoiceButNotTheLogprobs) {
    // Repetition penalty 4 on token 2 (logit 2.0 -> 0.5) makes token 4 (1.1) the greedy choice; the
    // reported logprobs are still those of the raw logits.
    SamplingParams p;
    p.temperature = 0.0f;
    p.repetition_penalty = 4.0f;
    p.logprobs = 3;
    Scratch scratch;
    RequestRng rng(0);
    const std::vector<int32_t> prompt = {2};
    const SampledToken t = sample_token(kLogits8, p, prompt, {}, {}, rng, scratch);
    EXPECT_EQ(t.token, 4);
    const Logprobs raw = log_softmax(kLogits8);
    EXPECT_EQ(t.logprob, raw.of(4));
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_EQ(t.top[0].first, 2);
    EXPECT_EQ(t.top[1].first, 4);
    EXPECT_EQ(t.top[2].first, 6);
    EXPECT_EQ(t.top[0].second, raw.of(2));
}

TEST(SamplerSample, NoLogprobsUnlessAsked) {
    SamplingParams p;
    Scratch scratch;
    RequestRng rng(0);
    const SampledToken t = sample_token(kLogits8, p, {}, {}, {}, rng, scratch);
    EXPECT_TRUE(std::isnan(t.logprob));
    EXPECT_TRUE(t.top.empty());
    p.logprobs = 0;  // the sampled token's logprob only
    const SampledToken u = sample_token(kLogits8, p, {}, {}, {}, rng, scratch);
    EXPECT_EQ(u.logprob, log_softmax(kLogits8).of(u.token));
    EXPECT_TRUE(u.top.empty());
}

}  // namespace
}  // namespace deepinfer::sample
