// A fixed pool of worker threads for data-parallel loops (kernels, per-sequence attention).
// parallel_for splits [0, n) into contiguous chunks, one per participating thread; the caller
// participates, so a pool of size 1 runs everything inline.
#pragma once

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
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    const std::function<void(int)>* task_ = nullptr;
    size_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
};

}  // namespace deepinfer
