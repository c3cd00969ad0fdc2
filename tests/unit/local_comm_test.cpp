// LocalComm and the two-level all-reduce: every collective at 1-5 ranks with exact values (the shared suite
// of support/comm_checks), rank-order summation, sub-groups, and the failure contract of dist/comm.h:
// mismatched calls, bad arguments, a rank that leaves or throws, a rank that stops calling.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "dist/local_comm.h"
#include "dist/two_level_comm.h"
#include "support/comm_checks.h"

namespace deepinfer::dist {
namespace {

using namespace std::chrono_literals;

LocalWorldOptions with_timeout(std::chrono::milliseconds timeout) {
    LocalWorldOptions options;
    options.timeout = timeout;
    return options;
}

// Runs the shared suite on every rank of `make(flat comm)` and expects no problem anywhere.
void expect_suite_passes(int n, const std::function<Expected<std::unique_ptr<Comm>>(std::unique_ptr<Comm>)>& wrap) {
    LocalWorld world(n, with_timeout(20s));
    std::vector<std::vector<std::string>> problems(static_cast<size_t>(n));
    std::vector<int> checks(static_cast<size_t>(n));
    std::vector<Status> status(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r, flat = world.take(r)]() mutable {
            Expected<std::unique_ptr<Comm>> comm = wrap(std::move(flat));
            if (!comm) {
                status[static_cast<size_t>(r)] = comm.status();
                return;
            }
            problems[static_cast<size_t>(r)] = testing::check_collectives(**comm, &checks[static_cast<size_t>(r)]);
        });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(status[static_cast<size_t>(r)].is_ok()) << status[static_cast<size_t>(r)].to_string();
        EXPECT_TRUE(problems[static_cast<size_t>(r)].empty())
            << "rank " << r << ":\n" << fmt::format("{}", fmt::join(problems[static_cast<size_t>(r)], "\n"));
        EXPECT_GE(checks[static_cast<size_t>(r)], 40) << "rank " << r << " ran fewer checks than the suite has";
    }
}

class LocalCommSizes : public ::testing::TestWithParam<int> {};

TEST_P(LocalCommSizes, EveryCollectiveGivesExactValues) {
    expect_suite_passes(GetParam(), [](std::unique_ptr<Comm> flat) { return Expected(std::move(flat)); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocalCommSizes, ::testing::Values(1, 2, 3, 4, 5));

struct Lanes {
    int ranks;
    int lane_size;
};

class TwoLevelLanes : public ::testing::TestWithParam<Lanes> {};

TEST_P(TwoLevelLanes, EveryCollectiveGivesExactValues) {
    const Lanes lanes = GetParam();
    expect_suite_passes(lanes.ranks, [&](std::unique_ptr<Comm> flat) {
        return make_two_level_comm(std::move(flat), {lanes.lane_size, 0});
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, TwoLevelLanes,
                         ::testing::Values(Lanes{4, 2}, Lanes{6, 2}, Lanes{6, 3}, Lanes{4, 4}, Lanes{4, 1},
                                           Lanes{8, 4}),
                         [](const ::testing::TestParamInfo<Lanes>& info) {
                             return fmt::format("ranks{}_lanes_of{}", info.param.ranks, info.param.lane_size);
                         });

TEST(LocalComm, SumsInRankOrderBitForBit) {
    constexpr int kRanks = 4;
    constexpr size_t kCount = 3001;
    std::vector<std::vector<float>> inputs(kRanks, std::vector<float>(kCount));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1e4f, 1e4f);
    for (auto& v : inputs) {
        for (float& x : v) x = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
    }
    std::vector<std::vector<float>> results(kRanks);
    auto status = run_local_ranks(kRanks, [&](Comm& comm) {
        std::vector<float> data = inputs[static_cast<size_t>(comm.rank())];
        DI_RETURN_IF_ERROR(comm.all_reduce_sum(data.data(), data.size()));
        results[static_cast<size_t>(comm.rank())] = data;
        return Status::ok();
    });
    size_t order_sensitive = 0;
    for (size_t i = 0; i < kCount; ++i) {
        float forward = inputs[0][i];
        for (int r = 1; r < kRanks; ++r) forward += inputs[static_cast<size_t>(r)][i];
        float backward = inputs[kRanks - 1][i];
        for (int r = kRanks - 2; r >= 0; --r) backward += inputs[static_cast<size_t>(r)][i];
        order_sensitive += forward != backward;
        for (int r = 0; r < kRanks; ++r) {
            ASSERT_EQ(std::bit_cast<uint32_t>(results[static_cast<size_t>(r)][i]), std::bit_cast<uint32_t>(forward))
                << "rank " << r << " element " << i;
        }
    }
    for (const auto& s : status) EXPECT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_GT(order_sensitive, 100u) << "the inputs do not tell summation orders apart";
}

TEST(LocalComm, Bf16SumRoundsOnceToNearestEven) {
    // 256 + 1 = 257 is a tie between 256 and 258 (even: 256); 256 + 3 = 259 is a tie between 258 and 260
    // (even: 260); 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly in fp32, but rounding to bf16 after each addition
    // would give 1 (each 1 + 2^-8 is a tie that goes to even).
    const std::vector<std::vector<float>> inputs = {{256.0f, 256.0f, 1.0f}, {1.0f, 3.0f, 0x1p-8f}, {0, 0, 0x1p-8f}};
    std::vector<std::vector<bf16>> results(3);
    auto status = run_local_ranks(3, [&](Comm& comm) {
        std::vector<bf16> data;
        for (float x : inputs[static_cast<size_t>(comm.rank())]) data.push_back(float_to_bf16(x));
        DI_RETURN_IF_ERROR(comm.all_reduce_sum_bf16(data.data(), data.size()));
        results[static_cast<size_t>(comm.rank())] = data;
        return Status::ok();
    });
    for (const auto& s : status) ASSERT_TRUE(s.is_ok()) << s.to_string();
    for (const auto& r : results) {
        EXPECT_EQ(bf16_to_float(r[0]), 256.0f);
        EXPECT_EQ(bf16_to_float(r[1]), 260.0f);
        EXPECT_EQ(bf16_to_float(r[2]), 1.0f + 0x1p-7f);
    }
}

TEST(LocalComm, BarrierSeparatesPhases) {
    constexpr int kRanks = 4;
    std::atomic<int> arrived{0};
    std::vector<int> seen(kRanks, -1);
    auto status = run_local_ranks(kRanks, [&](Comm& comm) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * comm.rank()));
        arrived.fetch_add(1);
        DI_RETURN_IF_ERROR(comm.barrier());
        seen[static_cast<size_t>(comm.rank())] = arrived.load();
        return Status::ok();
    });
    for (int r = 0; r < kRanks; ++r) {
        EXPECT_TRUE(status[static_cast<size_t>(r)].is_ok());
        EXPECT_EQ(seen[static_cast<size_t>(r)], kRanks) << "rank " << r << " left the barrier early";
    }
}

TEST(LocalComm, NestedSplitsAndNegativeColors) {
    constexpr int kRanks = 4;
    std::vector<std::string> outcome(kRanks);
    auto status = run_local_ranks(kRanks, [&](Comm& comm) {
        DI_ASSIGN_OR_RETURN(std::unique_ptr<Comm> half, comm.split(comm.rank() / 2, comm.rank()));
        DI_ASSIGN_OR_RETURN(std::unique_ptr<Comm> single, half->split(half->rank(), 0));
        DI_ASSIGN_OR_RETURN(std::unique_ptr<Comm> none, comm.split(-1, 0));
        float x = static_cast<float>(comm.rank() + 1);
        DI_RETURN_IF_ERROR(half->all_reduce_sum(&x, 1));
        float y = static_cast<float>(comm.rank() + 1);
        DI_RETURN_IF_ERROR(single->all_reduce_sum(&y, 1));
        outcome[static_cast<size_t>(comm.rank())] = fmt::format("{}/{} {} {}/{} {} {}", half->rank(), half->size(), x,
                                                                single->rank(), single->size(), y, none == nullptr);
        return Status::ok();
    });
    for (const auto& s : status) EXPECT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(outcome[0], "0/2 3 0/1 1 true");
    EXPECT_EQ(outcome[1], "1/2 3 0/1 2 true");
    EXPECT_EQ(outcome[2], "0/2 7 0/1 3 true");
    EXPECT_EQ(outcome[3], "1/2 7 0/1 4 true");
}

TEST(LocalComm, CommsOutliveTheirWorld) {
    std::vector<std::unique_ptr<Comm>> comms;
    {
        LocalWorld world(2);
        comms.push_back(world.take(0));
        comms.push_back(world.take(1));
    }
    std::vector<float> sums(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
        threads.emplace_back([&, r] {
            float x = static_cast<float>(r + 10);
            if (comms[static_cast<size_t>(r)]->all_reduce_sum(&x, 1).is_ok()) sums[static_cast<size_t>(r)] = x;
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(sums[0], 21.0f);
    EXPECT_EQ(sums[1], 21.0f);
}

// ---- the failure contract ------------------------------------------------------------------------------

TEST(LocalCommFailure, MismatchedCollectivesAreNamedOnEveryRank) {
    auto status = run_local_ranks(2, [](Comm& comm) {
        if (comm.rank() == 0) return comm.barrier();
        float x = 1;
        return comm.all_reduce_sum(&x, 1);
    }, with_timeout(20s));
    for (const auto& s : status) {
        EXPECT_EQ(s.code(), StatusCode::kInternal) << s.to_string();
        EXPECT_NE(s.message().find("rank 0: barrier, rank 1: all_reduce_sum"), std::string::npos) << s.message();
    }
}

TEST(LocalCommFailure, MismatchedCountsAndRootsAreNamed) {
    auto counts = run_local_ranks(3, [](Comm& comm) {
        std::vector<float> data(comm.rank() == 2 ? 8 : 4);
        return comm.all_reduce_sum(data.data(), data.size());
    }, with_timeout(20s));
    for (const auto& s : counts) {
        EXPECT_NE(s.message().find("disagree on the count: rank 0 has 4, rank 2 has 8"), std::string::npos)
            << s.to_string();
    }
    auto roots = run_local_ranks(2, [](Comm& comm) {
        char byte = 0;
        return comm.broadcast(&byte, 1, comm.rank());
    }, with_timeout(20s));
    for (const auto& s : roots) {
        EXPECT_NE(s.message().find("disagree on the root"), std::string::npos) << s.to_string();
    }
    auto a2a = run_local_ranks(2, [](Comm& comm) {
        // Rank 0 sends 4 bytes to rank 1, which expects 8.
        const std::vector<size_t> send = {0, comm.rank() == 0 ? size_t{4} : size_t{0}};
        const std::vector<size_t> recv = {comm.rank() == 1 ? size_t{8} : size_t{0}, 0};
        std::vector<char> in(8), out(8);
        return comm.all_to_all_v(in.data(), send, out.data(), recv);
    }, with_timeout(20s));
    for (const auto& s : a2a) {
        EXPECT_NE(s.message().find("rank 0 sends 4 bytes to rank 1, which expects 8"), std::string::npos)
            << s.to_string();
    }
}

TEST(LocalCommFailure, BadArgumentsOnOneRankFailEveryRank) {
    auto status = run_local_ranks(3, [](Comm& comm) {
        char byte = 0;
        return comm.broadcast(&byte, 1, comm.rank() == 1 ? 7 : 0);
    }, with_timeout(20s));
    EXPECT_EQ(status[1].code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status[1].message().find("root 7 outside the group of 3"), std::string::npos) << status[1].message();
    for (int r : {0, 2}) {
        EXPECT_FALSE(status[static_cast<size_t>(r)].is_ok());
        EXPECT_NE(status[static_cast<size_t>(r)].message().find("rank 1: broadcast: root 7"), std::string::npos)
            << status[static_cast<size_t>(r)].message();
    }
}

TEST(LocalCommFailure, RejectsOverlapsAndWrongCountVectors) {
    auto overlap = run_local_ranks(2, [](Comm& comm) {
        std::vector<char> buf(64);
        return comm.all_gather(buf.data() + 1, 8, buf.data());  // overlaps, and is not this rank's slot
    }, with_timeout(20s));
    for (const auto& s : overlap) {
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
        EXPECT_NE(s.message().find("overlaps"), std::string::npos) << s.to_string();
    }
    auto short_counts = run_local_ranks(3, [](Comm& comm) {
        const std::vector<size_t> counts = {1, 1};
        std::vector<float> send(3), recv(3);
        return comm.reduce_scatter_sum_v(send.data(), counts, recv.data());
    }, with_timeout(20s));
    for (const auto& s : short_counts) {
        EXPECT_NE(s.message().find("recv_counts has 2 entries, expected one per rank (3)"), std::string::npos)
            << s.to_string();
    }
    // A null bf16 buffer on rank 0: rank 1, already waiting with a valid one, must not wait 60 s.
    auto null_buffer = run_local_ranks(2, [](Comm& comm) {
        std::vector<bf16> data(3);
        return comm.all_reduce_sum_bf16(comm.rank() == 0 ? nullptr : data.data(), data.size());
    }, with_timeout(60s));
    EXPECT_EQ(null_buffer[0].code(), StatusCode::kInvalidArgument);
    EXPECT_NE(null_buffer[0].message().find("data is null"), std::string::npos) << null_buffer[0].message();
    EXPECT_NE(null_buffer[1].message().find("rank 0: all_reduce_sum: data is null"), std::string::npos)
        << null_buffer[1].to_string();
}

TEST(LocalCommFailure, RankThatLeavesFailsItsWaitingPeers) {
    // Rank 2 returns without calling: run_local_ranks destroys its Comm, as a dying thread would. The
    // peers must fail because it left, long before their 60 s timeout.
    auto status = run_local_ranks(3, [](Comm& comm) {
        if (comm.rank() == 2) return Status::ok();
        float x = 1;
        return comm.all_reduce_sum(&x, 1);
    }, with_timeout(60s));
    EXPECT_TRUE(status[2].is_ok());
    for (int r : {0, 1}) {
        EXPECT_EQ(status[static_cast<size_t>(r)].code(), StatusCode::kIoError);
        EXPECT_NE(status[static_cast<size_t>(r)].message().find("rank 2"), std::string::npos)
            << status[static_cast<size_t>(r)].message();
        EXPECT_NE(status[static_cast<size_t>(r)].message().find("left the group"), std::string::npos)
            << status[static_cast<size_t>(r)].message();
    }
}

TEST(LocalCommFailure, ExceptionBecomesAStatusAndReleasesPeers) {
    auto status = run_local_ranks(2, [](Comm& comm) -> Status {
        if (comm.rank() == 1) throw std::runtime_error("expert kernel exploded");
        return comm.barrier();
    }, with_timeout(60s));
    EXPECT_EQ(status[1].code(), StatusCode::kInternal);
    EXPECT_NE(status[1].message().find("rank 1 threw: expert kernel exploded"), std::string::npos);
    EXPECT_NE(status[0].message().find("left the group"), std::string::npos) << status[0].to_string();
}

TEST(LocalCommFailure, StuckRankTimesOutAndTheGroupStaysBroken) {
    std::vector<Status> second(2);
    auto status = run_local_ranks(2, [&](Comm& comm) {
        if (comm.rank() == 1) std::this_thread::sleep_for(1500ms);  // stuck well past rank 0's 100 ms timeout
        float x = 1;
        Status first = comm.all_reduce_sum(&x, 1);
        second[static_cast<size_t>(comm.rank())] = comm.barrier();
        return first;
    }, with_timeout(100ms));
    EXPECT_EQ(status[0].code(), StatusCode::kIoError);
    EXPECT_NE(status[0].message().find("timed out after 100 ms waiting for ranks [1]"), std::string::npos)
        << status[0].message();
    EXPECT_NE(status[1].message().find("the group is broken"), std::string::npos) << status[1].to_string();
    for (const auto& s : second) {
        EXPECT_EQ(s.code(), StatusCode::kIoError);
        EXPECT_NE(s.message().find("barrier on rank"), std::string::npos) << s.to_string();
    }
}

TEST(LocalCommFailure, ZeroTimeoutWaitsForASlowRank) {
    auto status = run_local_ranks(2, [](Comm& comm) {
        comm.set_timeout(0ms);
        if (comm.rank() == 1) std::this_thread::sleep_for(300ms);
        return comm.barrier();
    }, with_timeout(50ms));
    for (const auto& s : status) EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(LocalCommFailure, ExchangeCountsChecksItsArgument) {
    auto status = run_local_ranks(1, [](Comm& comm) {
        const std::vector<size_t> counts = {1, 2};
        return exchange_counts(comm, counts).status();
    });
    EXPECT_EQ(status[0].code(), StatusCode::kInvalidArgument) << status[0].to_string();
}

// ---- two-level all-reduce --------------------------------------------------------------------------------

TEST(TwoLevel, RejectsLanesThatDoNotDivideTheGroup) {
    // The check comes before the first split, so each rank fails alone without waiting for its peers.
    LocalWorld world(4);
    for (int r = 0; r < 4; ++r) {
        const Status s = make_two_level_comm(world.take(r), {3, 0}).status();
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
        EXPECT_NE(s.message().find("lane size 3 does not divide the group size 4"), std::string::npos) << s.message();
    }
}

// 1 + 1e8 - 1e8 + 1 in fp32: rank order ((1 + 1e8) - 1e8) + 1 = 1, lanes of two (1 + 1e8) + (-1e8 + 1) = 0.
// The two answers tell which path ran.
TEST(TwoLevel, AddsWithinLanesFirstAndHonoursMinBytes) {
    const std::vector<float> inputs = {1.0f, 1e8f, -1e8f, 1.0f};
    for (size_t min_bytes : {size_t{0}, size_t{64}}) {
        std::vector<float> got(4, -1.0f);
        std::vector<std::string> names(4);
        LocalWorld world(4);
        std::vector<std::thread> threads;
        for (int r = 0; r < 4; ++r) {
            threads.emplace_back([&, r, flat = world.take(r)]() mutable {
                Expected<std::unique_ptr<Comm>> comm = make_two_level_comm(std::move(flat), {2, min_bytes});
                if (!comm) return;
                names[static_cast<size_t>(r)] = (*comm)->backend_name();
                float x = inputs[static_cast<size_t>(r)];
                if ((*comm)->all_reduce_sum(&x, 1).is_ok()) got[static_cast<size_t>(r)] = x;
            });
        }
        for (auto& t : threads) t.join();
        for (int r = 0; r < 4; ++r) {
            EXPECT_EQ(got[static_cast<size_t>(r)], min_bytes == 0 ? 0.0f : 1.0f) << "rank " << r;
            EXPECT_EQ(names[static_cast<size_t>(r)], "two-level(local, lanes of 2)");
        }
    }
}

}  // namespace
}  // namespace deepinfer::dist
