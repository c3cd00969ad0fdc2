// A fixed pool of worker threads for data-parallel loops (kernels, per-sequence attention).
// parallel_for splits [0, n) into contiguous chunks, one per participating thread; the caller
// participates, so a pool of size 1 runs everything inline.
// Waiting is hybrid: workers (and the caller, for completion) poll for about a millisecond (pausing, then
// yielding the core between polls) before blocking on a futex (std::atomic::wait). A decode step issues a kernel
// call every few tens of microseconds; a wake-up through the kernel costs 25-55 us on a VM (170-250 us,
// p99 ~1.2 ms, on a 16-vCPU Firecracker guest), a polling worker picks the next call up at once.
// Why a futex and no condition variable: glibc's pthread_cond_broadcast waits for the waiters an earlier broadcast
// woke to leave the wait, so a sleeper whose vCPU the host preempted on its way out stalled the caller's next
// wake-up; a futex wake waits for nobody, and no thread ever blocks holding a lock another one needs.
// Work that is claimed rather than assigned (parallel_for, run_on_available) does not wait for a worker
// that has not picked the call up: a thread the OS has not scheduled -- a vCPU the host preempted, a core
// shared with another process -- leaves its chunk to the threads that are running.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
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

    // Run fn(begin, end, thread_index) over contiguous chunks of [0, n), at most size() of them, each at least
    // `grain` long, claimed as run_claimed_chunks claims them: thread_index names the thread running the chunk (for
    // its scratch), not the chunk. Blocks until all chunks are done. Not reentrant: a task must not call into the pool. Calls from
    // several threads (e.g. ranks of a LocalComm test sharing the global pool) run one after another.
    void parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t grain = 1);

    // Run fn(chunk, thread_index) once for every chunk in [0, n_chunks) (n_chunks < 2^32). Thread t owns the adjacent
    // chunks [ceil(n_chunks * t / size()), ceil(n_chunks * (t + 1) / size())) and runs them in order (a thread's part
    // of a weight is one stream across chunk boundaries, so the hardware prefetchers ramp up once per thread); a
    // thread done with its own takes chunks from the back of the fullest other range, so a thread that starts late
    // runs fewer chunks, and one that has not started when the others are done runs none (run_on_available).
    // setup(thread_index), when given, runs on a thread before its first chunk (e.g. per-thread activation decode);
    // a thread that finds no chunk skips it. parallel_for is this with one chunk per thread.
    void run_claimed_chunks(int64_t n_chunks, const std::function<void(int64_t, int)>& fn,
                            const std::function<void(int)>& setup = {});

    // Run fn(thread_index) once on every thread (thread_index in [0, size())); returns after all of them ran.
    // For work that needs every thread (the machine probes); everything else claims its work.
    void run_on_all(const std::function<void(int)>& fn);

    // Run fn(0) on the caller and fn(t) on each worker t that picks the call up before the caller is done with
    // fn(0); return once every fn that started has returned. fn must claim its work from shared state, so that
    // the caller alone finishes it when no worker comes.
    void run_on_available(const std::function<void(int)>& fn);

    // The process-wide pool used when none is passed explicitly; sized by set_global_threads.
    static ThreadPool& global();
    static void set_global_threads(int n_threads);

   private:
    // A call (run_on_all: every_thread), recorded with its chunks when profiling (core/thread_profile.h).
    void dispatch(const std::function<void(int)>& fn, bool every_thread, int64_t chunks);
    void publish(const std::function<void(int)>& fn, bool every_thread);
    template <class F>
    void run_inline(int64_t chunks, const F& f);
    template <class Done>
    void wait_for_workers(const Done& done);
    void worker_loop(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex call_mutex_;  // one caller at a time
    // A call is published as state_ = generation << 1 | 1 (open), after task_ and finished_ were written; the
    // caller closes it (clears the low bit) when it needs no more workers. A worker joins by counting itself in
    // entered_ and then checking that state_ is still the open call it saw, so the caller, which closes first
    // and then waits for entered_ to drop to 0, never returns while a worker can still touch task_. Sleepers
    // announce themselves (sleepers_, caller_sleeping_), then read their futex word (wake_word_, done_word_), then
    // re-check their condition, and sleep only while the word is unchanged; the other side, after changing the
    // condition, bumps the word and wakes it only when it sees an announcement: every flag and counter is
    // sequentially consistent, so either the sleeper sees the new condition or the waker sees the announcement
    // and the sleeper's wait finds the word changed.
    std::atomic<uint32_t> wake_word_{0};  // bumped for the workers: a call published, or stop_
    std::atomic<uint32_t> done_word_{0};  // bumped for the caller: the last worker left the call
    std::atomic<const std::function<void(int)>*> task_{nullptr};
    std::atomic<uint64_t> state_{0};
    std::atomic<int> entered_{0};
    std::atomic<int> finished_{0};  // workers that ran the open call (run_on_all waits for all of them)
    std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_sleeping_{false};
    std::atomic<bool> stop_{false};
};

}  // namespace deepinfer
