// The pool's thread profile (core/thread_profile.h): every kind of call recorded once with its chunks and threads
// (parallel_for, run_claimed_chunks, run_on_all, run_on_available, a call run on the caller alone), busy time
// within the threads' wall time, the busiest thread within the wall, nothing recorded while off, and the work
// itself unchanged.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.h"
#include "core/thread_profile.h"

namespace deepinfer {
namespace {

struct ProfilingOn {  // profiling is process-wide: each test leaves it off
    ProfilingOn() { set_thread_profiling(true); }
    ~ProfilingOn() { set_thread_profiling(false); }
};

void spin() {
    volatile double x = 0;
    for (int j = 0; j < 20000; ++j) x = x + 1.0;
}

// The bounds every record keeps, whatever the machine's timing.
void expect_bounds(const ThreadProfile& p, int threads) {
    EXPECT_EQ(p.threads, threads);
    EXPECT_GT(p.busiest_s, 0.0);
    EXPECT_LE(p.busiest_s, p.wall_s);  // (one clock: a thread's part lies within its call)
    EXPECT_GE(p.busy_s, p.busiest_s);
    EXPECT_LE(p.busy_s, p.wall_s * threads);
}

TEST(ThreadProfile, EachKindOfCall) {
    ProfilingOn on;
    ThreadPool pool(3);
    std::vector<std::atomic<int>> seen(40);
    auto mark = [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) spin(), seen[i].fetch_add(1);
    };
    struct Case {
        const char* what;
        std::function<void()> call;
        int64_t chunks;
    };
    const std::vector<Case> cases = {
        {"parallel_for of 40", [&] { pool.parallel_for(40, [&](size_t b, size_t e, int) { mark(b, e); }); }, 3},
        {"parallel_for of 1 (on the caller)",
         [&] { pool.parallel_for(1, [&](size_t b, size_t e, int) { mark(b, e); }); }, 1},
        {"run_claimed_chunks of 7",
         [&] { pool.run_claimed_chunks(7, [&](int64_t c, int) { mark(static_cast<size_t>(c), c + 1); }); }, 7},
        {"run_on_all", [&] { pool.run_on_all([&](int t) { mark(static_cast<size_t>(t), t + 1); }); }, 3},
        {"run_on_available", [&] { pool.run_on_available([&](int t) { t == 0 ? mark(0, 1) : void(); }); }, 0},
    };
    for (const Case& c : cases) {
        reset_thread_profile();
        c.call();
        const ThreadProfile p = thread_profile();
        EXPECT_EQ(p.calls, 1) << c.what;
        EXPECT_EQ(p.chunks, c.chunks) << c.what;
        expect_bounds(p, 3);
        if (c.chunks == 1) {
            EXPECT_EQ(p.busy_s, p.busiest_s) << c.what << ": one thread works";
        }
    }
    EXPECT_EQ(seen[0].load(), 5);  // every case's work ran
    for (size_t i = 1; i < 3; ++i) EXPECT_EQ(seen[i].load(), 3) << i;
    for (size_t i = 3; i < 7; ++i) EXPECT_EQ(seen[i].load(), 2) << i;
    for (size_t i = 7; i < 40; ++i) EXPECT_EQ(seen[i].load(), 1) << i;
}

TEST(ThreadProfile, PoolOfOneThreadAndTotals) {
    ProfilingOn on;
    ThreadPool one(1);
    for (int i = 0; i < 4; ++i) one.parallel_for(10, [](size_t, size_t, int) { spin(); });
    one.run_on_all([](int) { spin(); });
    const ThreadProfile p = thread_profile();
    EXPECT_EQ(p.calls, 5);
    EXPECT_EQ(p.chunks, 5);
    expect_bounds(p, 1);
    EXPECT_EQ(p.busy_s, p.busiest_s);
}

TEST(ThreadProfile, NothingRecordedWhileOff) {
    ThreadPool pool(2);
    set_thread_profiling(false);
    reset_thread_profile();
    std::atomic<int> runs{0};
    pool.parallel_for(9, [&](size_t b, size_t e, int) { runs += static_cast<int>(e - b); });
    pool.run_on_all([&](int) { ++runs; });
    EXPECT_EQ(runs.load(), 11);
    const ThreadProfile p = thread_profile();
    EXPECT_EQ(p.calls, 0);
    EXPECT_EQ(p.chunks, 0);
    EXPECT_EQ(p.wall_s, 0.0);
}

}  // namespace
}  // namespace deepinfer
