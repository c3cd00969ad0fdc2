// Row-independence invariants on tiny checkpoints (docs/ARCHITECTURE.md "Numerics"): chunked prefill and
// token-by-token decode give bit-identical logits to one-shot prefill: every row is computed the same
// way whatever else is in its chunk (canonical attention lists, per-row GEMM order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>

#include "support/tiny_model.h"

namespace deepinfer::testing {
namespace {

std::vector<int32_t> random_tokens(int n, int32_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(3 + rng() % (vocab - 3));
    return t;
}

double cosine(const float* a, const float* b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; ++i) {
        ab += double(a[i]) * b[i];
        aa += double(a[i]) * a[i];
        bb += double(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

class Invariants : public ::testing::TestWithParam<std::string> {};

// The logits of `tokens` fed in chunks of each size equal, bit for bit, those of one-shot prefill.
void expect_chunks_match_one_shot(model::Model& model, const std::vector<int32_t>& tokens,
                                  std::initializer_list<int> chunks) {
    const int n = static_cast<int>(tokens.size()), vocab = model.config().vocab_size;
    SingleSequence one(model);
    std::vector<float> ref = one.feed(tokens, true);  // [n, vocab]
    for (int chunk : chunks) {
        SingleSequence seq(model);
        std::vector<float> got;
        for (int s = 0; s < n; s += chunk) {
            std::vector<int32_t> part(tokens.begin() + s, tokens.begin() + std::min(n, s + chunk));
            auto l = seq.feed(part, true);
            got.insert(got.end(), l.begin(), l.end());
        }
        ASSERT_EQ(got.size(), ref.size());
        for (int r = 0; r < n; ++r) {
            const float* a = ref.data() + size_t(r) * vocab;
            const float* b = got.data() + size_t(r) * vocab;
            ASSERT_TRUE(std::equal(a, a + vocab, b)) << "chunk " << chunk << " row " << r << " cosine "
                                                     << cosine(a, b, vocab);
        }
    }
}

TEST_P(Invariants, ChunkedPrefillMatchesOneShot) {
    auto model = load_tiny_model(tiny_checkpoint(GetParam()));
    expect_chunks_match_one_shot(*model, random_tokens(90, model->config().vocab_size, 1), {1, 7, 64});
}

TEST_P(Invariants, LogitsAreInformative) {
    // The tiny weights must give a real distribution: not constant, not exploding.
    auto model = load_tiny_model(tiny_checkpoint(GetParam()));
    const auto& c = model->config();
    SingleSequence seq(*model);
    auto logits = seq.feed(random_tokens(20, c.vocab_size, 2), true);
    for (int r = 0; r < 20; ++r) {
        const float* l = logits.data() + size_t(r) * c.vocab_size;
        double mean = 0, sq = 0;
        for (int v = 0; v < c.vocab_size; ++v) {
            ASSERT_TRUE(std::isfinite(l[v]));
            mean += l[v];
            sq += double(l[v]) * l[v];
        }
        mean /= c.vocab_size;
        double std = std::sqrt(sq / c.vocab_size - mean * mean);
        EXPECT_GT(std, 0.05) << "row " << r;
        EXPECT_LT(std, 50.0) << "row " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, Invariants, ::testing::Values("default", "wide", "long"));

// The `long` preset's candidate consumers (ratio-1 layers masked to 8 blocks of 16 entries) past a few hundred
// tokens: fed token by token or in short chunks, a row's candidates are under 3/4 of the entries and only they
// are scored (model_compressed.cpp); one-shot, the union over the prompt's rows is every entry and all are scored.
// The logits must be the same bits.
TEST(Invariants, CandidateScoringMatchesOneShot) {
    auto model = load_tiny_model(tiny_checkpoint("long"));
    ASSERT_GE(model->config().candidate_source_layer_id, 0);
    expect_chunks_match_one_shot(*model, random_tokens(320, model->config().vocab_size, 3), {1, 24});
}

}  // namespace
}  // namespace deepinfer::testing
