// Fixed worker pool with a generation counter: each run_on_all publishes one task to every worker
// (hybrid spin-then-block waiting, see thread_pool.h).
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/env.h"

namespace deepinfer {

namespace {

// How long an idle thread keeps polling before it blocks. Blocking is expensive on a VM: a wake-up through the
// kernel took 25-55 us on a 2-vCPU KVM guest (docs/PERFORMANCE.md, "Thread wake-ups"), while a decode step
// calls into the pool every few tens of microseconds with serial work (norms, Sinkhorn, routing) in between.
// The first polls pause; after those the thread yields between polls, so that another runnable thread or
// process gets the core, and a vCPU with nothing else to run stays awake instead of halting.
constexpr int kPauseIterations = 2000;
constexpr std::chrono::microseconds kPollWindow{1000};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
}

// Poll `ready` for up to kPollWindow; true when it became true.
template <class Ready>
bool poll_until(const Ready& ready) {
    for (int i = 0; i < kPauseIterations; ++i) {
        if (ready()) return true;
        cpu_relax();
    }
    const auto deadline = std::chrono::steady_clock::now() + kPollWindow;
    while (std::chrono::steady_clock::now() < deadline) {
        if (ready()) return true;
        std::this_thread::yield();
    }
    return ready();
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
        if (!poll_until([&] { return stop_.load() || generation_.load() != seen; })) {
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
    if (!poll_until([&] { return pending_.load() == 0; })) {
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
