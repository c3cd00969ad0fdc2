// to_probabilities and sample_from: greedy, temperature, each filter alone on hand-made distributions with
// exact expected support sets, the top-p boundary, filter interactions, and the fast path against a
// brute-force full-sort reference on the real vocabulary size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "sample/distribution.h"
#include "sample/validate.h"

namespace deepinfer::sample {
namespace {

const float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> logits_of(std::initializer_list<double> probs) {
    std::vector<float> out;
    for (double q : probs) out.push_back(q > 0 ? static_cast<float>(std::log(q)) : kNegInf);
    return out;
}

std::set<int32_t> support(const std::vector<float>& probs) {
    std::set<int32_t> s;
    for (size_t i = 0; i < probs.size(); ++i)
        if (probs[i] > 0.0f) s.insert(static_cast<int32_t>(i));
    return s;
}

std::vector<float> distribution(std::vector<float> logits, const SamplingParams& p) {
    to_probabilities(logits, p);
    return logits;
}

SamplingParams params(float temperature = 1.0f, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
}

TEST(SamplerFilters, GreedyIsArgmaxWithTiesToTheLowestId) {
    EXPECT_EQ(argmax(std::vector<float>{0.1f, 3.0f, -2.0f, 2.9f}), 1);
    EXPECT_EQ(argmax(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}), 1);
    EXPECT_EQ(argmax(std::vector<float>{kNegInf, std::nanf(""), -1e30f}), 2);
    // Greedy ignores the other filters and gives a one-hot.
    const auto probs = distribution({0.5f, 7.0f, 7.0f, -1.0f}, params(0.0f, 1, 0.1f, 0.9f));
    EXPECT_EQ(probs, (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));
}

TEST(SamplerFilters, TemperatureScalesTheSoftmax) {
    const std::vector<float> logits = {0.0f, 1.0f, 2.0f, -1.0f};
    for (float t : {0.25f, 1.0f, 3.0f}) {
        const auto probs = distribution(logits, params(t));
        double z = 0.0;
        for (float x : logits) z += std::exp(static_cast<double>(x / t));
        for (size_t i = 0; i < logits.size(); ++i)
            EXPECT_NEAR(probs[i], std::exp(static_cast<double>(logits[i] / t)) / z, 1e-6) << "T=" << t;
    }
    // Temperatures below kMinTemperature act as kMinTemperature (vLLM's clamp), not as overflow.
    const std::vector<float> close = {0.0f, 0.01f, 0.02f};
    EXPECT_EQ(distribution(close, params(1e-6f)), distribution(close, params(kMinTemperature)));
    const auto sharp = distribution(close, params(1e-6f));
    EXPECT_NEAR(sharp[2], 1.0 / (1.0 + std::exp(-1.0) + std::exp(-2.0)), 1e-6);
}

TEST(SamplerFilters, SuppressedTokensGetZero) {
    const auto probs = distribution({kNegInf, 0.0f, kNegInf, 0.0f}, params());
    EXPECT_EQ(probs, (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
}

TEST(SamplerFilters, TopKKeepsTheKLargest) {
    const std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
    EXPECT_EQ(support(distribution(logits, params(1.0f, 1))), (std::set<int32_t>{1}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 2))), (std::set<int32_t>{1, 3}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 3))), (std::set<int32_t>{1, 2, 3}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 5))).size(), 5u);
    EXPECT_EQ(support(distribution(logits, params(1.0f, 50))).size(), 5u);
    EXPECT_EQ(support(distribution(logits, params(1.0f, -1))).size(), 5u);
    // Renormalised over the survivors.
    const auto two = distribution(logits, params(1.0f, 2));
    EXPECT_NEAR(two[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
    EXPECT_NEAR(two[1] + two[3], 1.0, 1e-6);
}

TEST(SamplerFilters, TopKKeepsEveryTokenTiedWithTheKth) {
    // As vLLM: the threshold is the k-th largest value, and ties with it survive.
    const std::vector<float> logits = {2.0f, 4.0f, 2.0f, 1.0f, 2.0f};
    EXPECT_EQ(support(distribution(logits, params(1.0f, 2))), (std::set<int32_t>{0, 1, 2, 4}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 1))), (std::set<int32_t>{1}));
    EXPECT_EQ(support(distribution({3.0f, 3.0f, 0.0f}, params(1.0f, 1))), (std::set<int32_t>{0, 1}));
}

TEST(SamplerFilters, TopPKeepsTheTokenThatCrossesP) {
    // Ids deliberately not in probability order: p(2) = 0.5, p(0) = 0.3, p(1) = 0.2.
    const auto logits = logits_of({0.3, 0.2, 0.5});
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.1f))), (std::set<int32_t>{2}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.4999f))), (std::set<int32_t>{2}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.5001f))), (std::set<int32_t>{0, 2}));  // 0 crosses
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.7999f))), (std::set<int32_t>{0, 2}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.8001f))), (std::set<int32_t>{0, 1, 2}));  // 1 crosses
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 1.0f))), (std::set<int32_t>{0, 1, 2}));
    const auto nucleus = distribution(logits, params(1.0f, 0, 0.6f));
    EXPECT_NEAR(nucleus[2], 0.5 / 0.8, 1e-6);
    EXPECT_NEAR(nucleus[0], 0.3 / 0.8, 1e-6);
}

TEST(SamplerFilters, TopPExactBoundaryDropsTheTokenWhoseMassBeforeEqualsP) {
    // Four equal logits: masses are exactly 1 each (exp(0)), so the boundary is exact. With top_p = 0.5 the
    // third token has exactly 0.5 before it and is dropped, as vLLM's "cumsum ascending <= 1 - p" drops it;
    // ties are ranked by id.
    const std::vector<float> logits(4, 1.5f);
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.5f))), (std::set<int32_t>{0, 1}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.7f))), (std::set<int32_t>{0, 1, 2}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.75f))), (std::set<int32_t>{0, 1, 2}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.76f))), (std::set<int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.25f))), (std::set<int32_t>{0}));
}

TEST(SamplerFilters, TopPOnALargeTiedSetKeepsTheLowestIds) {
    // More candidates than the direct-sort limit, all tied: the nucleus is the first half by id.
    const std::vector<float> logits(10000, -3.0f);
    const auto probs = distribution(logits, params(1.0f, 0, 0.5f));
    for (size_t i = 0; i < logits.size(); ++i) ASSERT_EQ(probs[i], i < 5000 ? 1.0f / 5000 : 0.0f) << i;
}

TEST(SamplerFilters, MinPIsRelativeToTheMostLikelyToken) {
    const auto logits = logits_of({0.05, 0.5, 0.2, 0.25});
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 1.0f, 0.45f))), (std::set<int32_t>{1, 3}));   // >= 0.225
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 1.0f, 0.3f))), (std::set<int32_t>{1, 2, 3}));  // >= 0.15
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 1.0f, 0.09f))).size(), 4u);                    // >= 0.045
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 1.0f, 1.0f))), (std::set<int32_t>{1}));
    EXPECT_EQ(support(distribution({2.0f, 2.0f, 1.0f}, params(1.0f, 0, 1.0f, 1.0f))), (std::set<int32_t>{0, 1}));
    // Temperature comes first: at T = 2 the ratio 0.2 / 0.5 = 0.4 becomes sqrt(0.4) = 0.63.
    EXPECT_EQ(support(distribution(logits, params(2.0f, 0, 1.0f, 0.6f))), (std::set<int32_t>{1, 2, 3}));
}

TEST(SamplerFilters, TopPIsMeasuredAfterTopK) {
    // p = (0.4, 0.3, 0.2, 0.1). top_p 0.5 alone keeps {0, 1} (0.4 before token 1). With top_k = 2 the
    // survivors renormalise to (4/7, 3/7), so token 1 has 0.57 > 0.5 before it and is dropped.
    const auto logits = logits_of({0.4, 0.3, 0.2, 0.1});
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.5f))), (std::set<int32_t>{0, 1}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 2, 0.5f))), (std::set<int32_t>{0}));
}

TEST(SamplerFilters, TopPIsMeasuredAfterMinP) {
    // vLLM V1 order. p = (0.4, 0.3, 0.2, 0.1), min_p 0.3 drops token 3 (0.1 < 0.12), leaving
    // (4/9, 3/9, 2/9); top_p 0.72 then drops token 2 (7/9 = 0.78 before it). Applied the other way round
    // (V0 / SGLang) token 2 would survive (0.7 < 0.72 before it).
    const auto logits = logits_of({0.4, 0.3, 0.2, 0.1});
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.72f))), (std::set<int32_t>{0, 1, 2}));
    EXPECT_EQ(support(distribution(logits, params(1.0f, 0, 0.72f, 0.3f))), (std::set<int32_t>{0, 1}));
}

TEST(SamplerFilters, SampleFromInvertsTheCdf) {
    const std::vector<float> probs = {0.0f, 0.25f, 0.0f, 0.5f, 0.25f, 0.0f};
    EXPECT_EQ(sample_from(probs, 0.0), 1);
    EXPECT_EQ(sample_from(probs, 0.2499), 1);
    EXPECT_EQ(sample_from(probs, 0.25), 3);
    EXPECT_EQ(sample_from(probs, 0.7499), 3);
    EXPECT_EQ(sample_from(probs, 0.75), 4);
    EXPECT_EQ(sample_from(probs, std::nextafter(1.0, 0.0)), 4);  // never the trailing zero-probability id
    // Unnormalised input is scaled by its sum.
    EXPECT_EQ(sample_from(std::vector<float>{2.0f, 6.0f}, 0.26), 1);
    EXPECT_EQ(sample_from(std::vector<float>{2.0f, 6.0f}, 0.24), 0);
}

// Brute force: full sort, then the filters exactly as documented, in double.
std::vector<double> reference(const std::vector<float>& logits, const SamplingParams& p) {
    const size_t n = logits.size();
    const float t = std::max(p.temperature, kMinTemperature);
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(logits[i] / t);
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    const double m = x[order[0]];
    std::vector<bool> alive(n, true);
    for (size_t i = 0; i < n; ++i) alive[i] = std::exp(x[i] - m) >= p.min_p;
    if (p.top_k > 0) {
        int seen = 0;
        double kth = -INFINITY;
        for (int32_t id : order)
            if (alive[id] && ++seen == p.top_k) {
                kth = x[id];
                break;
            }
        for (size_t i = 0; i < n; ++i) alive[i] = alive[i] && x[i] >= kth;
    }
    if (p.top_p < 1.0f) {
        double z = 0.0;
        for (size_t i = 0; i < n; ++i) z += alive[i] ? std::exp(x[i] - m) : 0.0;
        double before = 0.0;
        for (int32_t id : order) {
            if (!alive[id]) continue;
            if (before >= p.top_p * z) alive[id] = false;
            before += std::exp(x[id] - m);
        }
    }
    std::vector<double> probs(n, 0.0);
    double z = 0.0;
    for (size_t i = 0; i < n; ++i) z += alive[i] ? std::exp(x[i] - m) : 0.0;
    for (size_t i = 0; i < n; ++i) probs[i] = alive[i] ? std::exp(x[i] - m) / z : 0.0;
    return probs;
}

// Real-vocabulary logits: a Gaussian body with a few strong candidates; bf16-rounded when asked, which
// makes ties common (the model's logits come out of a bf16 GEMM).
std::vector<float> random_logits(uint32_t seed, bool bf16) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> body(0.0f, 2.0f);
    std::vector<float> logits(129280);
    for (float& x : logits) x = body(gen);
    for (int i = 0; i < 20; ++i) logits[gen() % logits.size()] = 9.0f + static_cast<float>(i) * 0.3f;
    if (bf16) {
        for (float& x : logits) {
            uint32_t bits;
            std::memcpy(&bits, &x, 4);
            bits &= 0xffff0000u;
            std::memcpy(&x, &bits, 4);
        }
    }
    return logits;
}

TEST(SamplerFilters, MatchesBruteForceOnTheFullVocabulary) {
    const std::vector<SamplingParams> cases = {
        params(1.0f, 0, 0.95f),       params(0.7f, 0, 0.5f),          params(1.0f, 50),
        params(1.0f, 40, 0.9f),       params(1.0f, 0, 1.0f, 0.05f),   params(1.0f, 1000, 0.9f, 0.01f),
        params(1.5f, 0, 0.999f),      params(1.0f, 100000),           params(2.0f, 0, 0.95f, 0.001f),
        params(0.6f, 5, 0.3f, 0.5f),
    };
    Scratch scratch;
    for (bool bf16 : {false, true}) {
        for (uint32_t seed = 1; seed <= 2; ++seed) {
            const auto logits = random_logits(seed, bf16);
            for (const SamplingParams& p : cases) {
                std::vector<float> fast = logits;
                to_probabilities(fast, p, scratch);
                const auto slow = reference(logits, p);
                size_t support_size = 0;
                for (size_t i = 0; i < logits.size(); ++i) {
                    ASSERT_EQ(fast[i] > 0.0f, slow[i] > 0.0) << "token " << i << " T=" << p.temperature << " k="
                                                             << p.top_k << " p=" << p.top_p << " min_p=" << p.min_p
                                                             << " bf16=" << bf16;
                    ASSERT_NEAR(fast[i], slow[i], 1e-6 + 1e-5 * slow[i]) << "token " << i;
                    support_size += slow[i] > 0.0;
                }
                EXPECT_GT(support_size, 0u);
            }
        }
    }
}

}  // namespace
}  // namespace deepinfer::sample
