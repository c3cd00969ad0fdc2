// ThreadPool: every index of parallel_for runs exactly once, run_on_all reaches every thread, and the
// hybrid spin-then-block hand-off neither loses a wake-up nor returns early, whether calls come back to
// back (workers spinning) or after the workers went to sleep; claimed work (parallel_for, run_claimed_chunks,
// run_on_available) finishes without a worker that is not running, and waits for one that is inside the call.
#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <initializer_list>
#include <random>
#include <thread>
#include <vector>

namespace deepinfer {
namespace {

// A worker held in a signal handler stands for a thread the OS does not run (a vCPU the host preempted): it
// neither picks calls up nor finishes what it is inside of until released. Lock-free atomics only, so the
// handler is async-signal-safe. Each worker knows its index (t_index), so a signal that arrives when no hold is
// asked for, or twice, holds nobody by mistake.
std::atomic<bool> g_hold{false};
std::atomic<uint32_t> g_held{0};  // bit t: worker t sits in the handler
thread_local int t_index = -1;
void hold_handler(int) {
    if (!g_hold.load() || t_index < 0) return;
    const uint32_t bit = 1u << t_index;
    if (g_held.fetch_or(bit) & bit) return;  // already held (a second signal)
    while (g_hold.load()) {
    }
    g_held.fetch_and(~bit);
}

class HeldWorkers {
   public:
    explicit HeldWorkers(ThreadPool& pool) : ids_(static_cast<size_t>(pool.size())) {
        pool.run_on_all([&](int t) {
            ids_[static_cast<size_t>(t)] = pthread_self();
            t_index = t;
        });
        struct sigaction action = {};
        action.sa_handler = hold_handler;
        sigemptyset(&action.sa_mask);
        sigaction(SIGUSR1, &action, &previous_);
    }
    ~HeldWorkers() {
        release();
        sigaction(SIGUSR1, &previous_, nullptr);
    }
    // Returns once worker t sits in the handler. The signal is sent again every 20 ms until it does: under
    // ThreadSanitizer a signal that arrives just before the worker enters its futex sleep waits, pending, for the
    // worker's next atomic operation, which then only comes with the next call (a second signal interrupts the sleep).
    void hold(int t) {
        g_hold = true;
        const uint32_t bit = 1u << t;
        while (!(g_held.load() & bit)) {
            pthread_kill(ids_[static_cast<size_t>(t)], SIGUSR1);
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
            while (!(g_held.load() & bit) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        }
    }
    void hold(std::initializer_list<int> ts) {
        for (int t : ts) hold(t);
    }
    void release() {
        g_hold = false;
        while (g_held.load() != 0) std::this_thread::yield();
    }

   private:
    std::vector<pthread_t> ids_;
    struct sigaction previous_ = {};
};

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

TEST(ThreadPool, ClaimedChunksRunOnceEachThreadItsOwnRangeInOrderFirst) {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{100}, int64_t{1000}}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            std::vector<std::vector<int64_t>> order(static_cast<size_t>(threads));  // each thread's chunks, in turn
            std::vector<int> setups(static_cast<size_t>(threads), 0);
            std::atomic<int> setup_after_chunk{0};
            pool.run_claimed_chunks(
                n,
                [&](int64_t c, int t) {
                    ++hits[static_cast<size_t>(c)];
                    order[static_cast<size_t>(t)].push_back(c);
                    if (setups[static_cast<size_t>(t)] != 1) ++setup_after_chunk;
                    // slow enough that other threads join and steal
                    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(c % 3 * 5);
                    while (std::chrono::steady_clock::now() < until) {
                    }
                },
                [&](int t) {
                    if (!order[static_cast<size_t>(t)].empty()) ++setup_after_chunk;
                    ++setups[static_cast<size_t>(t)];
                });
            SCOPED_TRACE(::testing::Message() << "threads " << threads << " n " << n);
            for (int64_t c = 0; c < n; ++c) ASSERT_EQ(hits[static_cast<size_t>(c)].load(), 1) << "chunk " << c;
            EXPECT_EQ(setup_after_chunk.load(), 0) << "setup not once, before the thread's first chunk";
            for (int t = 0; t < threads; ++t) {
                const auto& seq = order[static_cast<size_t>(t)];
                EXPECT_EQ(setups[static_cast<size_t>(t)], seq.empty() ? 0 : 1) << "thread " << t;
                // Its own chunks [ceil(n t / T), ceil(n (t + 1) / T)) from the front, in order, before any other
                // (the others take from the back).
                const int64_t begin = (n * t + threads - 1) / threads, end = (n * (t + 1) + threads - 1) / threads;
                size_t own = 0;
                while (own < seq.size() && seq[own] >= begin && seq[own] < end) ++own;
                for (size_t i = 0; i < own; ++i)
                    EXPECT_EQ(seq[i], begin + static_cast<int64_t>(i)) << "thread " << t;
                for (size_t i = own; i < seq.size(); ++i)
                    EXPECT_TRUE(seq[i] < begin || seq[i] >= end) << "thread " << t << " ran its own chunk " << seq[i]
                                                                 << " after another thread's";
            }
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

TEST(ThreadPool, ClaimedWorkDoesNotWaitForAWorkerThatIsNotRunning) {
    ThreadPool pool(3);
    HeldWorkers held(pool);
    held.hold({1});
    // In a thread of its own, so that a pool that waited for the held worker fails the test instead of hanging it.
    auto calls = std::async(std::launch::async, [&] {
        for (int call = 0; call < 200; ++call) {
            std::vector<std::atomic<int>> hits(1000);
            std::atomic<int> by_held{0};
            pool.parallel_for(hits.size(), [&](size_t b, size_t e, int t) {
                if (t == 1) ++by_held;
                for (size_t i = b; i < e; ++i) ++hits[i];
            });
            for (auto& h : hits)
                if (h.load() != 1) return false;
            pool.run_on_available([&](int t) {
                if (t == 1) ++by_held;
            });
            std::vector<std::atomic<int>> chunk_hits(50);
            pool.run_claimed_chunks(
                static_cast<int64_t>(chunk_hits.size()),
                [&](int64_t c, int t) {
                    if (t == 1) ++by_held;
                    ++chunk_hits[static_cast<size_t>(c)];
                },
                [&](int t) {
                    if (t == 1) ++by_held;
                });
            for (auto& h : chunk_hits)
                if (h.load() != 1) return false;
            if (by_held.load() != 0) return false;
        }
        return true;
    });
    const bool finished = calls.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    held.release();  // lets a waiting pool finish, so the test ends either way
    EXPECT_TRUE(finished) << "parallel_for waited for a worker that was not running";
    EXPECT_TRUE(calls.get());
    std::atomic<int> mask{0};
    pool.run_on_all([&](int t) { mask.fetch_or(1 << t); });
    EXPECT_EQ(mask.load(), 0x7);  // the released worker takes calls again
}

TEST(ThreadPool, AWorkerHeldInItsSleepDelaysNoWakeUp) {
    // Workers asleep, one of them stopped inside its wait (a sleeper whose vCPU the host preempted): every call then
    // wakes the sleepers, and no wake-up may wait for the stopped one. (With a condition variable the second call
    // hung: glibc's pthread_cond_broadcast waits for the waiters an earlier broadcast woke to leave the wait.)
    ThreadPool pool(3);
    HeldWorkers held(pool);
    for (int round = 0; round < 3; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the poll window: both workers asleep
        held.hold(1);
        auto calls = std::async(std::launch::async, [&] {
            int by_held = 0;
            for (int call = 0; call < 20; ++call) {
                std::atomic<int> ran{0};
                pool.run_on_available([&](int t) {
                    if (t == 1) ++by_held;
                    ++ran;
                });
                if (ran.load() < 1) return false;
                std::this_thread::sleep_for(std::chrono::milliseconds(2));  // worker 2 back to sleep
            }
            return by_held == 0;
        });
        const bool finished = calls.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
        held.release();  // lets a stalled caller finish, so the test ends either way
        ASSERT_TRUE(finished) << "round " << round << ": a wake-up waited for the held sleeper";
        EXPECT_TRUE(calls.get());
    }
}

TEST(ThreadPool, ClaimedChunksOnTheCallerAloneFollowTheRanges) {
    // With every worker held the caller runs all chunks, in an order the ranges fix: 3 threads, 7 chunks own
    // [0, 3), [3, 5), [5, 7); the caller runs its own from the front, then the back of the fullest other range
    // (the first of equals).
    ThreadPool pool(3);
    HeldWorkers held(pool);
    held.hold({1, 2});
    auto run = std::async(std::launch::async, [&] {
        std::vector<int64_t> order;
        std::vector<int> threads;
        pool.run_claimed_chunks(7, [&](int64_t c, int t) {
            order.push_back(c);
            threads.push_back(t);
        });
        return std::make_pair(order, threads);
    });
    const bool finished = run.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    held.release();
    ASSERT_TRUE(finished) << "run_claimed_chunks waited for a held worker";
    const auto [order, threads] = run.get();
    EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 4, 6, 3, 5}));
    EXPECT_EQ(threads, std::vector<int>(7, 0));
    // Fewer chunks than threads (ranges [0, 1), [1, 1), [1, 2)): all on the caller, in order.
    held.hold({1, 2});
    auto two = std::async(std::launch::async, [&] {
        std::vector<int64_t> order;
        pool.run_claimed_chunks(2, [&](int64_t c, int) { order.push_back(c); });
        return order;
    });
    const bool two_finished = two.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    held.release();
    ASSERT_TRUE(two_finished);
    EXPECT_EQ(two.get(), (std::vector<int64_t>{0, 1}));
}

TEST(ThreadPool, ClaimedWorkWaitsForAWorkerInsideIt) {
    ThreadPool pool(2);
    for (int call = 0; call < 20; ++call) {
        std::atomic<bool> inside{false}, slow_done{false};
        pool.run_on_available([&](int t) {
            if (t == 1) {
                inside = true;
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
                slow_done = true;
                return;
            }
            // The caller is done with its part only once worker 1 joined (or after a generous wait).
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (!inside.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        });
        ASSERT_TRUE(inside.load()) << "call " << call << ": worker 1 never joined";
        ASSERT_TRUE(slow_done.load()) << "call " << call << " returned while worker 1 was inside it";
    }
}

TEST(ThreadPool, WorkersHeldAndReleasedAtRandomLoseNothing) {
    ThreadPool pool(4);
    HeldWorkers held(pool);
    std::atomic<bool> done{false};
    // Holds a random worker for 0-300 us at a time, also in the middle of a chunk.
    std::thread preempter([&] {
        std::mt19937 rng(7);
        while (!done.load()) {
            held.hold(1 + static_cast<int>(rng() % 3));
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
            held.release();
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
        }
    });
    std::mt19937 rng(11);
    for (int call = 0; call < 3000; ++call) {
        const size_t n = rng() % 64;
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](size_t b, size_t e, int) {
            for (size_t i = b; i < e; ++i) {
                ++hits[i];
                const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(2);
                while (std::chrono::steady_clock::now() < until) {
                }
            }
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "call " << call << " n " << n << " i " << i;
    }
    done = true;
    preempter.join();
}

}  // namespace
}  // namespace deepinfer
