// Fixed worker pool: each call is published under a generation number, run by the caller and by the workers
// that join it (all of them for run_on_all); hybrid spin-then-futex waiting, see thread_pool.h.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>

#include "core/env.h"
#include "core/thread_profile.h"

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// f() on the calling thread alone, recorded as one call of the pool (its other threads idle) when profiling.
template <class F>
void ThreadPool::run_inline(int64_t chunks, const F& f) {
    if (!thread_profiling()) {
        f();
        return;
    }
    const auto start = std::chrono::steady_clock::now();
    f();
    std::vector<double> busy(static_cast<size_t>(n_threads_));
    busy[0] = seconds_since(start);
    record_pool_call(busy[0], busy.data(), n_threads_, chunks);
}

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    stop_ = true;
    wake_word_.fetch_add(1);
    wake_word_.notify_all();
    for (auto& worker : workers_) worker.join();
}

void ThreadPool::worker_loop(int index) {
    uint64_t last_generation = 0;  // of the last call this worker ran
    uint64_t seen = 0;
    auto has_call = [&] {
        seen = state_.load();
        return stop_.load() || ((seen & 1) != 0 && (seen >> 1) != last_generation);
    };
    while (true) {
        if (!poll_until(has_call)) {
            ++sleepers_;
            for (;;) {
                const uint32_t word = wake_word_.load();
                if (has_call()) break;
                wake_word_.wait(word);
            }
            --sleepers_;
        }
        if (stop_.load()) return;
        ++entered_;
        if (state_.load() == seen) {  // still open: the caller waits for this worker to leave
            last_generation = seen >> 1;
            (*task_.load())(index);
            ++finished_;
        }
        if (entered_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
            done_word_.fetch_add(1);
            done_word_.notify_one();
        }
    }
}

template <class Done>
void ThreadPool::wait_for_workers(const Done& done) {
    if (poll_until(done)) return;
    caller_sleeping_ = true;
    for (;;) {
        const uint32_t word = done_word_.load();
        if (done()) break;
        done_word_.wait(word);
    }
    caller_sleeping_ = false;
}

void ThreadPool::dispatch(const std::function<void(int)>& fn, bool every_thread, int64_t chunks) {
    if (n_threads_ == 1) {
        run_inline(chunks, [&] { fn(0); });
        return;
    }
    if (!thread_profiling()) {
        publish(fn, every_thread);
        return;
    }
    // Each thread's time inside fn: busy[t] is written by thread t only, read after publish returned (every
    // worker that entered has left, thread_pool.h).
    std::vector<double> busy(static_cast<size_t>(n_threads_));
    const std::function<void(int)> timed = [&](int t) {
        const auto t0 = std::chrono::steady_clock::now();
        fn(t);
        busy[static_cast<size_t>(t)] += seconds_since(t0);
    };
    const auto start = std::chrono::steady_clock::now();
    publish(timed, every_thread);
    record_pool_call(seconds_since(start), busy.data(), n_threads_, chunks);
}

void ThreadPool::publish(const std::function<void(int)>& fn, bool every_thread) {
    std::lock_guard<std::mutex> call(call_mutex_);
    task_ = &fn;
    finished_ = 0;
    const uint64_t generation = (state_.load() >> 1) + 1;
    state_ = generation << 1 | 1;
    if (sleepers_.load() > 0) {
        wake_word_.fetch_add(1);
        wake_word_.notify_all();
    }
    fn(0);
    // Every worker that ran counted itself out of entered_ after counting itself in finished_, and no worker
    // enters twice, so once all of them finished and entered_ is 0 nobody is inside.
    if (every_thread)
        wait_for_workers([&] { return finished_.load() == n_threads_ - 1 && entered_.load() == 0; });
    state_ = generation << 1;  // closed: a worker that has not joined yet leaves this call alone
    wait_for_workers([&] { return entered_.load() == 0; });
    task_ = nullptr;
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) { dispatch(fn, true, n_threads_); }

void ThreadPool::run_on_available(const std::function<void(int)>& fn) { dispatch(fn, false, 0); }

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t grain) {
    if (n == 0) return;
    grain = std::max<size_t>(grain, 1);
    const size_t n_chunks = std::min<size_t>(static_cast<size_t>(n_threads_), (n + grain - 1) / grain);
    if (n_chunks <= 1) {
        run_inline(1, [&] { fn(0, n, 0); });
        return;
    }
    const size_t per = n / n_chunks, extra = n % n_chunks;  // the first `extra` chunks are one longer
    run_claimed_chunks(static_cast<int64_t>(n_chunks), [&](int64_t chunk, int t) {
        const auto c = static_cast<size_t>(chunk);
        const size_t begin = c * per + std::min(c, extra);
        fn(begin, begin + per + (c < extra ? 1 : 0), t);
    });
}

void ThreadPool::run_claimed_chunks(int64_t n_chunks, const std::function<void(int64_t, int)>& fn,
                                    const std::function<void(int)>& setup) {
    if (n_chunks <= 0) return;
    if (n_chunks >= (int64_t{1} << 32)) throw std::invalid_argument("run_claimed_chunks: 2^32 chunks or more");
    if (n_threads_ == 1 || n_chunks == 1) {
        run_inline(n_chunks, [&] {
            if (setup) setup(0);
            for (int64_t c = 0; c < n_chunks; ++c) fn(c, 0);
        });
        return;
    }
    // Each thread's range as one word, next chunk from the front | end << 32, on a line of its own (a thread's
    // claims of its own chunks touch no other thread's line); a claim from either end is one compare-exchange.
    struct alignas(64) Range {
        std::atomic<uint64_t> front_back;
    };
    const int threads = n_threads_;
    thread_local std::vector<Range> ranges_storage;  // the caller's; the pool runs one call at a time
    if (ranges_storage.size() < static_cast<size_t>(threads)) ranges_storage = std::vector<Range>(threads);
    Range* ranges = ranges_storage.data();
    auto range_start = [&](int t) { return static_cast<uint64_t>((n_chunks * t + threads - 1) / threads); };
    for (int t = 0; t < threads; ++t)
        ranges[t].front_back.store(range_start(t) | range_start(t + 1) << 32, std::memory_order_relaxed);
    // Relaxed is enough: a claim only has to be unique; what fn wrote is published by run_on_available's return.
    auto claim = [](Range& r, bool from_back, int64_t& chunk) {
        uint64_t v = r.front_back.load(std::memory_order_relaxed);
        for (;;) {
            const uint64_t front = v & 0xffffffffu, back = v >> 32;
            if (front >= back) return false;
            const uint64_t next = from_back ? (front | (back - 1) << 32) : v + 1;
            if (r.front_back.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
                chunk = static_cast<int64_t>(from_back ? back - 1 : front);
                return true;
            }
        }
    };
    dispatch([&](int t) {
        bool started = false;
        auto run = [&](int64_t chunk) {
            if (!started && setup) setup(t);
            started = true;
            fn(chunk, t);
        };
        int64_t chunk;
        while (claim(ranges[t], false, chunk)) run(chunk);
        for (;;) {
            int fullest = -1;
            uint64_t most = 0;
            for (int o = 0; o < threads; ++o) {
                const uint64_t v = ranges[o].front_back.load(std::memory_order_relaxed);
                const uint64_t front = v & 0xffffffffu, back = v >> 32;
                if (back > front && back - front > most) most = back - front, fullest = o;
            }
            if (fullest < 0) break;
            if (claim(ranges[fullest], true, chunk)) run(chunk);
        }
    }, false, n_chunks);  // (run_on_available's call, with its chunks counted)
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
