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

namespace deepinfer {
namespace {

// DP attention: each rank runs its own sequence (different prompts and lengths, one rank sometimes idle),
// experts are split over the ranks; every rank's logits match a one-rank run of its sequence.
TEST(ParallelDp, EachRankMatchesItsSingleRun) {
    const std::string dir = testing::tiny_checkpoint("default");
    const int world = 2;
    std::vector<std::vector<int32_t>> prompts = {random_tokens(40, 21), random_tokens(23, 22)};
    std::vector<std::vector<float>> single(world);
    {
        auto m = model::Model::load(dir, false);
        ASSERT_TRUE(m.has_value());
        for (int r = 0; r < world; ++r) {
            testing::SingleSequence seq(**m);
            single[r] = seq.feed(prompts[r], true);
            auto tail = seq.feed({5, 6, 7}, true);
            single[r].insert(single[r].end(), tail.begin(), tail.end());
        }
    }
    std::vector<std::vector<float>> got(world);
    auto statuses = dist::run_local_ranks(world, [&](dist::Comm& comm) -> Status {
        model::ParallelPlan plan;
        plan.dp_size = plan.ep_size = world;
        plan.dp_rank = plan.ep_rank = comm.rank();
        plan.dp = plan.ep = &comm;
        DI_ASSIGN_OR_RETURN(auto m, model::Model::load(dir, false, plan));
        testing::SingleSequence seq(*m);
        got[comm.rank()] = seq.feed(prompts[comm.rank()], true);
        // Rank 1 idles for one step (an empty forward still joins the MoE collectives), then both go on.
        if (comm.rank() == 1) {
            model::ForwardBatch empty;
            model::ForwardOutput out;
            DI_RETURN_IF_ERROR(m->forward(seq.pools(), empty, &out));
        } else {
            auto l = seq.feed({5}, true);
            got[0].insert(got[0].end(), l.begin(), l.end());
        }
        for (int32_t t : comm.rank() == 1 ? std::vector<int32_t>{5, 6, 7} : std::vector<int32_t>{6, 7}) {
            auto l = seq.feed({t}, true);
            got[comm.rank()].insert(got[comm.rank()].end(), l.begin(), l.end());
        }
        if (comm.rank() == 0) {  // rank 0 idles at the end, so both ranks make the same number of calls
            model::ForwardBatch empty;
            model::ForwardOutput out;
            DI_RETURN_IF_ERROR(m->forward(seq.pools(), empty, &out));
        }
        return Status::ok();
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
    for (int r = 0; r < world; ++r) {
        ASSERT_EQ(got[r].size(), single[r].size()) << "rank " << r;
        const int vocab = 1024;
        for (size_t row = 0; row < got[r].size() / vocab; ++row) {
            const float* a = single[r].data() + row * vocab;
            const float* b = got[r].data() + row * vocab;
            double ab = 0, aa = 0, bb = 0;
            for (int v = 0; v < vocab; ++v) {
                ab += double(a[v]) * b[v];
                aa += double(a[v]) * a[v];
                bb += double(b[v]) * b[v];
            }
            EXPECT_GT(ab / std::sqrt(aa * bb), 0.999) << "rank " << r << " row " << row;
            EXPECT_EQ(std::max_element(a, a + vocab) - a, std::max_element(b, b + vocab) - b) << "rank " << r << " row " << row;
        }
    }
}

}  // namespace
}  // namespace deepinfer
