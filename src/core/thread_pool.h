// A fixed pool of worker threads for data-parallel loops (kernels, per-sequence attention).
// parallel_for splits [0, n) into contiguous chunks, one per participating thread; the caller
// participates, so a pool of size 1 runs everything inline.
// Waiting is hybrid: workers (and the caller, for completion) poll for about a millisecond (pausing, then
// yielding the core between polls) before blocking on a condition variable. A decode step issues a kernel
// call every few tens of microseconds; a wake-up through the kernel costs 25-55 us on a VM, a polling worker
// picks the next call up at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class ThreadPool {
   public:
    // n_threads <= 0 means all hardware threads.
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Run fn(begin, end, thread_index) over contiguous chunks of [0, n). Chunks are at least `grain`
    // long. Blocks until all chunks are done. Not reentrant: a task must not call parallel_for. Calls from
    // several threads (e.g. ranks of a LocalComm test sharing the global pool) run one after another.
    void parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t grain = 1);

    // Run fn(thread_index) once on every thread (thread_index in [0, size())).
    void run_on_all(const std::function<void(int)>& fn);

    // The process-wide pool used when none is passed explicitly; sized by set_global_threads.
    static ThreadPool& global();
    static void set_global_threads(int n_threads);

   private:
    void worker_loop(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex call_mutex_;  // one caller at a time
    // Publication: task_ and pending_ are written, then generation_ is bumped; a worker that sees a new
    // generation runs task_. Sleepers announce themselves (sleepers_, caller_sleeping_) before re-checking
    // their condition under mutex_, and the other side notifies only when it sees an announcement: every
    // flag and counter is sequentially consistent, so one of the two always sees the other's write.
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    std::atomic<const std::function<void(int)>*> task_{nullptr};
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_sleeping_{false};
    std::atomic<bool> stop_{false};
};

}  // namespace deepinfer
