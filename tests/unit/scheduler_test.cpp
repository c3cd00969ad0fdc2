// The scheduler and KV pools as a state machine, driven by a fake runner (no model): budgets, chunked
// prefill, admission, preemption by recompute, prefix-cache hits and block accounting.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/cache_layout.h"
#include "sched/scheduler.h"

namespace deepinfer::sched {
namespace {

kv::CacheLayout small_layout() {
    kv::CacheLayout L;
    L.block_tokens = 4;
    L.window = 8;
    L.n_window_layers = 2;
    L.head_dim = 32;
    L.index_head_dim = 32;
    L.window_record_bytes = 8;
    L.compressed_record_bytes = 4;
    L.index_record_bytes = 2;
    L.sources = {{0, 1, 0, 16}};
    L.window_block_bytes = 2 * 4 * 8;
    L.compressed_block_bytes = 4 * (4 + 2);
    L.source_of_layer = {0};
    return L;
}

// Emulates the runner: the forward pass advances each chunk's cache, sampled chunks yield a token.
std::vector<int64_t> run_step(Scheduler& s, const SchedulerOutput& out, int32_t next_token = 7) {
    std::vector<int64_t> sampled;
    for (const auto& c : out.chunks) {
        Sequence* seq = s.get(c.seq_id);
        EXPECT_EQ(seq->computed(), c.start_pos);
        seq->cache.set_length(c.start_pos + c.n_tokens);
    }
    s.on_chunks_done(out);
    for (const auto& c : out.chunks)
        if (c.sample) {
            s.append_token(c.seq_id, next_token);
            sampled.push_back(c.seq_id);
        }
    return sampled;
}

std::unique_ptr<Sequence> make_seq(int64_t id, int n, const kv::CacheLayout& L, int32_t first = 100) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), first);
    return std::make_unique<Sequence>(id, t, L);
}

TEST(Scheduler, ChunkedPrefillRespectsTokenBudget) {
    kv::CacheLayout L = small_layout();
    kv::KvPools pools(L, 64, 64);
    Scheduler s({8, 5, false}, pools);
    ASSERT_TRUE(s.add(make_seq(1, 12, L)));
    auto out = s.schedule();
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_EQ(out.chunks[0].n_tokens, 5);
    EXPECT_FALSE(out.chunks[0].sample);
    run_step(s, out);
    out = s.schedule();
    EXPECT_EQ(out.chunks[0].start_pos, 5);
    EXPECT_EQ(out.chunks[0].n_tokens, 5);
    run_step(s, out);
    out = s.schedule();
    EXPECT_EQ(out.chunks[0].n_tokens, 2);
    EXPECT_TRUE(out.chunks[0].sample);
    EXPECT_EQ(run_step(s, out).size(), 1u);
    out = s.schedule();  // decode
    EXPECT_EQ(out.chunks[0].start_pos, 12);
    EXPECT_EQ(out.chunks[0].n_tokens, 1);
    EXPECT_TRUE(out.chunks[0].sample);
}

TEST(Scheduler, DecodesFirstThenAdmitsWaitingFcfs) {
    kv::CacheLayout L = small_layout();
    kv::KvPools pools(L, 64, 64);
    Scheduler s({2, 16, false}, pools);
    s.add(make_seq(1, 3, L));
    run_step(s, s.schedule());
    s.add(make_seq(2, 6, L));
    s.add(make_seq(3, 6, L));
    auto out = s.schedule();
    ASSERT_EQ(out.chunks.size(), 2u);  // max_num_seqs = 2: sequence 3 waits
    EXPECT_EQ(out.chunks[0].seq_id, 1);
    EXPECT_EQ(out.chunks[0].n_tokens, 1);
    EXPECT_EQ(out.chunks[1].seq_id, 2);
    EXPECT_EQ(out.chunks[1].n_tokens, 6);
    run_step(s, out);
    s.finish(1);
    out = s.schedule();
    ASSERT_EQ(out.chunks.size(), 2u);
    EXPECT_EQ(out.chunks[1].seq_id, 3);
}

TEST(Scheduler, PreemptsLatestArrivalWhenBlocksRunOutAndRecomputesIt) {
    kv::CacheLayout L = small_layout();
    kv::KvPools pools(L, 6, 6);  // 6 blocks of 4 positions each
    Scheduler s({4, 64, false}, pools);
    s.add(make_seq(1, 8, L));
    s.add(make_seq(2, 8, L, 300));
    run_step(s, s.schedule());  // both prefilled: 2 + 2 compressed blocks, tokens now 9 each
    std::vector<int64_t> preempted;
    for (int step = 0; step < 12 && preempted.empty(); ++step) {
        auto out = s.schedule();
        preempted = out.preempted;
        run_step(s, out);
    }
    ASSERT_EQ(preempted.size(), 1u);
    EXPECT_EQ(preempted[0], 2);  // the later arrival
    Sequence* victim = s.get(2);
    EXPECT_EQ(victim->computed(), 0);
    EXPECT_GT(victim->tokens.size(), 9u);  // generated tokens are kept and recomputed
    EXPECT_EQ(s.stats().preemptions, 1);
    s.finish(1);
    auto out = s.schedule();
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_EQ(out.chunks[0].seq_id, 2);
    EXPECT_EQ(out.chunks[0].start_pos, 0);
    EXPECT_EQ(out.chunks[0].n_tokens, static_cast<int32_t>(victim->tokens.size()));
    EXPECT_TRUE(out.chunks[0].sample);
}

TEST(Scheduler, PrefixCacheHitSharesBlocksAndFreesCleanly) {
    kv::CacheLayout L = small_layout();
    kv::KvPools pools(L, 32, 32);
    {
        Scheduler s({4, 64, true}, pools);
        s.add(make_seq(1, 14, L));
        run_step(s, s.schedule());
        // Same first 12 tokens (3 full blocks), different tail.
        auto seq2 = make_seq(2, 14, L);
        seq2->tokens[13] = 999;
        s.add(std::move(seq2));
        auto out = s.schedule();
        ASSERT_EQ(out.chunks.size(), 2u);
        EXPECT_EQ(out.chunks[1].start_pos, 12);  // 3 blocks reused
        EXPECT_EQ(out.chunks[1].n_tokens, 2);
        Sequence* a = s.get(1);
        Sequence* b = s.get(2);
        for (int i = 0; i < 3; ++i) EXPECT_EQ(a->cache.compressed_blocks()[i], b->cache.compressed_blocks()[i]);
        // The window blocks the resumed rows read are shared; older ones are not needed.
        EXPECT_EQ(b->cache.window_blocks()[0], -1);
        EXPECT_EQ(b->cache.window_blocks()[1], a->cache.window_blocks()[1]);
        EXPECT_EQ(b->cache.window_blocks()[2], a->cache.window_blocks()[2]);
        auto st = s.stats();
        EXPECT_EQ(st.prefix_hits, 1);
        EXPECT_EQ(st.prefix_hit_tokens, 12);
        run_step(s, out);
        s.finish(1);
        s.finish(2);
        // Only the prefix cache holds blocks now; eviction returns them all.
        EXPECT_GT(pools.compressed.used_count(), 0);
    }
    EXPECT_EQ(pools.compressed.used_count(), 0);
    EXPECT_EQ(pools.window.used_count(), 0);
}

TEST(Scheduler, NeverHitsTheLastPromptToken) {
    kv::CacheLayout L = small_layout();
    kv::KvPools pools(L, 32, 32);
    Scheduler s({4, 64, true}, pools);
    s.add(make_seq(1, 8, L));
    run_step(s, s.schedule());
    s.add(make_seq(2, 8, L));  // identical 8-token prompt: 2 full blocks, but the last token must run
    auto out = s.schedule();
    ASSERT_EQ(out.chunks.size(), 2u);
    EXPECT_EQ(out.chunks[1].start_pos, 4);
    EXPECT_EQ(out.chunks[1].n_tokens, 4);
}

TEST(Scheduler, RejectsSequencesThatCanNeverFit) {
    kv::CacheLayout L = small_layout();
    kv::KvPools pools(L, 4, 4);
    Scheduler s({4, 64, false}, pools);
    EXPECT_FALSE(s.add(make_seq(1, 40, L)));
    EXPECT_TRUE(s.add(make_seq(2, 8, L)));
}

TEST(Scheduler, TruncateRollsBackTokensAndCache) {
    kv::CacheLayout L = small_layout();
    kv::KvPools pools(L, 32, 32);
    Scheduler s({4, 64, false}, pools);
    s.add(make_seq(1, 5, L));
    run_step(s, s.schedule());
    for (int32_t d : {11, 12, 13}) s.append_token(1, d);  // draft tokens appended before a verify step
    auto out = s.schedule();
    EXPECT_EQ(out.chunks[0].n_tokens, 4);
    run_step(s, out);
    s.truncate(1, 7);  // keep one accepted draft
    Sequence* seq = s.get(1);
    EXPECT_EQ(seq->tokens.size(), 7u);
    EXPECT_EQ(seq->computed(), 7);
}

}  // namespace
}  // namespace deepinfer::sched
