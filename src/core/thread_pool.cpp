// Fixed worker pool with a generation counter: each run_on_all publishes one task to every worker
// (hybrid spin-then-block waiting, see thread_pool.h).
#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

#include "core/env.h"

namespace deepinfer {

namespace {

// About 50-100 us of polling before a thread blocks (a pause is ~40-140 cycles, CPU dependent).
constexpr int kSpinIterations = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    while (true) {
        bool ready = false;
        for (int i = 0; i < kSpinIterations && !ready; ++i) {
            ready = stop_.load() || generation_.load() != seen;
            if (!ready) cpu_relax();
        }
        if (!ready) {
            std::unique_lock<std::mutex> lock(mutex_);
            ++sleepers_;
            wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
            --sleepers_;
        }
        if (stop_.load()) return;
        seen = generation_.load();
        (*task_.load())(index);
        if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
            std::lock_guard<std::mutex> lock(mutex_);
            done_.notify_one();
        }
    }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
    if (n_threads_ == 1) {
        fn(0);
        return;
    }
    std::lock_guard<std::mutex> call(call_mutex_);
    task_ = &fn;
    pending_ = n_threads_ - 1;
    ++generation_;
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        wake_.notify_all();
    }
    fn(0);
    bool done = false;
    for (int i = 0; i < kSpinIterations && !done; ++i) {
        done = pending_.load() == 0;
        if (!done) cpu_relax();
    }
    if (!done) {
        std::unique_lock<std::mutex> lock(mutex_);
        caller_sleeping_ = true;
        done_.wait(lock, [&] { return pending_.load() == 0; });
        caller_sleeping_ = false;
    }
    task_ = nullptr;
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t grain) {
    if (n == 0) return;
    grain = std::max<size_t>(grain, 1);
    size_t max_chunks = (n + grain - 1) / grain;
    size_t n_chunks = std::min<size_t>(static_cast<size_t>(n_threads_), max_chunks);
    if (n_chunks <= 1) {
        fn(0, n, 0);
        return;
    }
    size_t per = n / n_chunks, extra = n % n_chunks;
    run_on_all([&](int t) {
        size_t ti = static_cast<size_t>(t);
        if (ti >= n_chunks) return;
        size_t begin = ti * per + std::min(ti, extra);
        size_t end = begin + per + (ti < extra ? 1 : 0);
        fn(begin, end, t);
    });
}

namespace {
std::unique_ptr<ThreadPool>& global_slot() {
    static std::unique_ptr<ThreadPool> pool;
    return pool;
}
}  // namespace

ThreadPool& ThreadPool::global() {
    auto& slot = global_slot();
    if (!slot) slot = std::make_unique<ThreadPool>(env::default_threads());
    return *slot;
}

void ThreadPool::set_global_threads(int n_threads) {
    auto& slot = global_slot();
    if (slot && (n_threads <= 0 ? static_cast<int>(std::thread::hardware_concurrency()) : n_threads) == slot->size())
        return;
    slot.reset();
    slot = std::make_unique<ThreadPool>(n_threads);
}

}  // namespace deepinfer
