// Engine invariants on the tiny checkpoint (docs/ARCHITECTURE.md "Testing"): batched, chunked, preempted,
// prefix-cached and speculative runs give the same greedy tokens as a one-shot single run; a seeded
// sampled request gives the same tokens whatever else is in the batch.
#include <gtest/gtest.h>

#include <random>

#include "deepinfer/engine.h"
#include "support/tiny_model.h"

namespace deepinfer {
namespace {

std::vector<int32_t> random_prompt(int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(3 + rng() % 900);
    return t;
}

EngineConfig base_config() {
    EngineConfig c;
    c.model_dir = testing::tiny_checkpoint("default");
    c.kv_cache_memory = int64_t{64} << 20;
    return c;
}

GenerationRequest greedy(const std::vector<int32_t>& prompt, int max_tokens, const std::string& id) {
    GenerationRequest r;
    r.id = id;
    r.prompt = prompt;
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    return r;
}

std::vector<std::vector<int32_t>> run(const EngineConfig& config, std::vector<GenerationRequest> requests) {
    auto engine = Engine::create(config);
    EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
    auto outs = (*engine)->generate(std::move(requests));
    EXPECT_TRUE(outs.has_value()) << outs.status().to_string();
    std::vector<std::vector<int32_t>> tokens;
    for (auto& o : *outs) tokens.push_back(o.token_ids);
    return tokens;
}

struct Workload {
    std::vector<GenerationRequest> requests;
    std::vector<std::vector<int32_t>> single;  // each request alone, one-shot prefill
};

const Workload& workload() {
    static const Workload w = [] {
        Workload w;
        const int lengths[] = {5, 40, 97, 150};
        for (int i = 0; i < 4; ++i) w.requests.push_back(greedy(random_prompt(lengths[i], 10 + i), 24, "r" + std::to_string(i)));
        for (const auto& r : w.requests) w.single.push_back(run(base_config(), {r})[0]);
        return w;
    }();
    return w;
}

TEST(EngineInvariants, BatchedEqualsSingle) {
    EXPECT_EQ(run(base_config(), workload().requests), workload().single);
}

TEST(EngineInvariants, ChunkedPrefillEqualsOneShot) {
    EngineConfig c = base_config();
    c.max_num_batched_tokens = 13;  // prefill in chunks of up to 13 tokens, mixed with decodes
    EXPECT_EQ(run(c, workload().requests), workload().single);
}

TEST(EngineInvariants, PreemptedEqualsUninterrupted) {
    // Three sequences that each grow to 9 blocks of 16 positions, in a pool of 20 blocks: admission fits,
    // decoding does not, so the latest arrival is preempted and recomputed.
    EngineConfig c = base_config();
    c.block_tokens = 16;
    c.num_kv_blocks = 20;
    c.enable_prefix_caching = false;
    std::vector<GenerationRequest> requests;
    std::vector<std::vector<int32_t>> single;
    EngineConfig roomy = c;
    roomy.num_kv_blocks = 64;
    for (int i = 0; i < 3; ++i) {
        requests.push_back(greedy(random_prompt(60, 40 + i), 80, "p" + std::to_string(i)));
        single.push_back(run(roomy, {requests.back()})[0]);
    }
    auto engine = Engine::create(c);
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    auto outs = (*engine)->generate(requests);
    ASSERT_TRUE(outs.has_value());
    for (size_t i = 0; i < outs->size(); ++i) EXPECT_EQ((*outs)[i].token_ids, single[i]) << "request " << i;
    EXPECT_GT((*engine)->metrics().preemptions, 0);
}

TEST(EngineInvariants, PrefixCacheHitEqualsMiss) {
    EngineConfig c = base_config();
    c.block_tokens = 16;
    auto engine = Engine::create(c);
    ASSERT_TRUE(engine.has_value());
    std::vector<int32_t> shared = random_prompt(100, 99);
    std::vector<int32_t> a = shared, b = shared;
    a.push_back(7);
    b.push_back(8);
    auto first = (*engine)->generate({greedy(a, 12, "a")});
    auto second = (*engine)->generate({greedy(b, 12, "b")});
    ASSERT_TRUE(first.has_value() && second.has_value());
    EXPECT_GE((*second)[0].cached_prompt_tokens, 96);  // 6 blocks of 16 reused
    EngineConfig no_cache = c;
    no_cache.enable_prefix_caching = false;
    EXPECT_EQ((*second)[0].token_ids, run(no_cache, {greedy(b, 12, "b")})[0]);
}

TEST(EngineInvariants, SpeculativeGreedyEqualsPlainGreedy) {
    for (int k : {1, 3, 5}) {
        EngineConfig c = base_config();
        c.speculative_tokens = k;
        auto engine = Engine::create(c);
        ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
        auto outs = (*engine)->generate(workload().requests);
        ASSERT_TRUE(outs.has_value());
        for (size_t i = 0; i < outs->size(); ++i) EXPECT_EQ((*outs)[i].token_ids, workload().single[i]) << "k " << k << " request " << i;
        EngineMetrics m = (*engine)->metrics();
        EXPECT_GT(m.spec_draft_tokens, 0) << "k " << k;
    }
}

TEST(EngineInvariants, SeededSamplingIgnoresBatchComposition) {
    GenerationRequest r = greedy(random_prompt(30, 5), 20, "seeded");
    r.params.temperature = 0.9f;
    r.params.top_p = 0.9f;
    r.params.seed = 1234;
    auto alone = run(base_config(), {r})[0];
    std::vector<GenerationRequest> batch = workload().requests;
    batch.insert(batch.begin() + 1, r);
    auto together = run(base_config(), batch);
    EXPECT_EQ(together[1], alone);
    r.params.seed = 4321;
    EXPECT_NE(run(base_config(), {r})[0], alone);
}

}  // namespace
}  // namespace deepinfer
