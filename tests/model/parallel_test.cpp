// Tensor and expert parallelism over LocalComm (ranks as threads): every split of the tiny model gives the
// same greedy tokens and logits within tolerance as one rank (partial sums are added in another order, and
// TP rounds each rank's wo_b partial to bf16 as the reference's RowParallelLinear does).
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>

#include "dist/local_comm.h"
#include "support/tiny_model.h"

namespace deepinfer {
namespace {

std::vector<int32_t> random_tokens(int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(3 + rng() % 900);
    return t;
}

struct RankResult {
    std::vector<float> prefill;   // [n, vocab]
    std::vector<int32_t> greedy;  // decoded tokens
};

// Prefill a prompt (all-row logits), then decode greedily; on a given parallel plan built from `world`.
RankResult run_plan(const std::string& dir, int tp, int ep, dist::Comm* world) {
    std::unique_ptr<dist::Comm> tp_comm, ep_comm;
    model::ParallelPlan plan;
    if (world) {
        const int r = world->rank();
        if (tp > 1) {
            auto c = world->split(r / tp, r);
            EXPECT_TRUE(c.has_value()) << c.status().to_string();
            tp_comm = std::move(*c);
        }
        if (ep > 1) {
            auto c = world->split(r / ep, r);
            EXPECT_TRUE(c.has_value()) << c.status().to_string();
            ep_comm = std::move(*c);
        }
        plan.tp_size = tp;
        plan.tp_rank = tp > 1 ? tp_comm->rank() : 0;
        plan.tp = tp_comm.get();
        plan.ep_size = ep;
        plan.ep_rank = ep > 1 ? ep_comm->rank() : 0;
        plan.ep = ep_comm.get();
    }
    auto m = model::Model::load(dir, false, plan);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    testing::SingleSequence seq(**m);
    RankResult out;
    out.prefill = seq.feed(random_tokens(70, 3), true);
    const int vocab = (*m)->config().vocab_size;
    const float* last = out.prefill.data() + out.prefill.size() - vocab;
    int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    for (int step = 0; step < 12; ++step) {
        out.greedy.push_back(next);
        auto l = seq.feed({next});
        next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    }
    return out;
}

class Parallel : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(Parallel, MatchesOneRank) {
    const auto [world_size, tp, ep] = GetParam();
    const std::string dir = testing::tiny_checkpoint("default");
    static RankResult single = run_plan(dir, 1, 1, nullptr);
    std::vector<RankResult> results(world_size);
    auto statuses = dist::run_local_ranks(world_size, [&](dist::Comm& comm) {
        results[comm.rank()] = run_plan(dir, tp, ep, &comm);
        return Status::ok();
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
    const int vocab = 1024;
    for (int r = 0; r < world_size; ++r) {
        // Every rank of a replica computes the same logits.
        EXPECT_EQ(results[r].prefill, results[0].prefill) << "rank " << r;
        EXPECT_EQ(results[r].greedy, results[0].greedy) << "rank " << r;
    }
    const auto& got = results[0];
    ASSERT_EQ(got.prefill.size(), single.prefill.size());
    double worst = 1.0;
    for (size_t row = 0; row < got.prefill.size() / vocab; ++row) {
        const float* a = single.prefill.data() + row * vocab;
        const float* b = got.prefill.data() + row * vocab;
        double ab = 0, aa = 0, bb = 0;
        for (int v = 0; v < vocab; ++v) {
            ab += double(a[v]) * b[v];
            aa += double(a[v]) * a[v];
            bb += double(b[v]) * b[v];
        }
        worst = std::min(worst, ab / std::sqrt(aa * bb));
    }
    EXPECT_GT(worst, 0.999) << "world " << world_size << " tp " << tp << " ep " << ep;
    EXPECT_EQ(got.greedy, single.greedy) << "world " << world_size << " tp " << tp << " ep " << ep;
}

INSTANTIATE_TEST_SUITE_P(Splits, Parallel,
                         ::testing::Values(std::make_tuple(2, 2, 1), std::make_tuple(2, 1, 2), std::make_tuple(2, 2, 2),
                                           std::make_tuple(4, 2, 4), std::make_tuple(4, 1, 4)));

}  // namespace
}  // namespace deepinfer
