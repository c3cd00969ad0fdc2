// ThreadPool: every index of parallel_for runs exactly once, run_on_all reaches every thread, and the
// hybrid spin-then-block hand-off neither loses a wake-up nor returns early, whether calls come back to
// back (workers spinning) or after the workers went to sleep.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace deepinfer {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
            std::vector<std::atomic<int>> hits(n);
            pool.parallel_for(n, [&](size_t b, size_t e, int t) {
                EXPECT_GE(t, 0);
                EXPECT_LT(t, threads);
                for (size_t i = b; i < e; ++i) ++hits[i];
            });
            for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
        }
    }
}

TEST(ThreadPool, RunOnAllReachesEveryThreadBackToBack) {
    ThreadPool pool(4);
    // Many short calls in a row: workers are still spinning when the next one is published.
    for (int call = 0; call < 20000; ++call) {
        std::atomic<int> mask{0};
        pool.run_on_all([&](int t) { mask.fetch_or(1 << t); });
        ASSERT_EQ(mask.load(), 0xf) << "call " << call;  // run_on_all returned only after every thread ran
    }
}

TEST(ThreadPool, WakesWorkersThatWentToSleep) {
    ThreadPool pool(3);
    for (int call = 0; call < 20; ++call) {
        // Long enough for every worker to leave its spin window and block.
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        std::atomic<int> count{0};
        pool.run_on_all([&](int) { ++count; });
        ASSERT_EQ(count.load(), 3);
    }
}

TEST(ThreadPool, CallerWaitsForASlowWorker) {
    ThreadPool pool(2);
    for (int call = 0; call < 5; ++call) {
        std::atomic<bool> slow_done{false};
        pool.run_on_all([&](int t) {
            if (t == 1) {
                // Past the caller's spin window: it must block and be woken, not return early.
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                slow_done = true;
            }
        });
        ASSERT_TRUE(slow_done.load());
    }
}

TEST(ThreadPool, ConcurrentCallersRunOneAfterAnother) {
    ThreadPool pool(3);
    std::atomic<int> inside{0}, overlap{0}, total{0};
    auto caller = [&] {
        for (int i = 0; i < 2000; ++i)
            pool.run_on_all([&](int t) {
                if (t == 0 && inside.fetch_add(1) != 0) ++overlap;
                ++total;
                if (t == 0) --inside;
            });
    };
    std::thread a(caller), b(caller);
    a.join();
    b.join();
    EXPECT_EQ(overlap.load(), 0);
    EXPECT_EQ(total.load(), 2 * 2000 * 3);
}

TEST(ThreadPool, DestroysWhileWorkersSpinOrSleep) {
    std::atomic<int> ran{0};
    for (int i = 0; i < 50; ++i) {
        ThreadPool pool(4);
        pool.run_on_all([&](int) { ++ran; });
        if (i % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }  // the destructor joins spinning and sleeping workers alike (a lost stop would hang here)
    EXPECT_EQ(ran.load(), 50 * 4);
}

}  // namespace
}  // namespace deepinfer
