// Where the thread pool's threads spend a parallel call (off by default; `deepinfer bench-ops --thread-profile`,
// `bench-decode --thread-profile`). Every call of a ThreadPool -- the GEMM drivers' work units, attention's heads,
// the row-wise ops' rows, the model's loops, a call the pool runs on the caller alone -- adds its wall time, its
// chunks and each thread's time inside it; the quantized GEMMs' shared activation preparation
// (backend/cpu/cpu_gemm_quant.cpp) also adds its wall time apart. That tells apart the ways a many-core run falls
// short of its threads' sum: work outside the pool's calls (serial), threads idle while the busiest one works
// (balance: busy against busiest), threads not inside the call (hand-off, wake-ups: busiest against the wall),
// and threads busy but slow (compare the thread time per call with `bench-ops --in-cache`). Costs two clock reads
// per thread and a lock per call when on, one relaxed load per call when off.
#pragma once

#include <cstdint>

namespace deepinfer {

struct ThreadProfile {
    int64_t calls = 0;         // the pool's calls
    int64_t chunks = 0;        // the chunks they ran (run_claimed_chunks, parallel_for; a call on the caller alone: 1)
    int threads = 0;           // the largest pool that ran one
    double wall_s = 0;         // their wall time, summed over calls
    double busy_s = 0;         // every thread's time inside them, summed over threads and calls
    double busiest_s = 0;      // per call the busiest thread's time inside it, summed over calls
    double shared_acts_s = 0;  // wall time of the quantized GEMMs' activations made ready once for all threads
    int64_t shared_waves = 0;  // ... in how many waves

    ThreadProfile& operator+=(const ThreadProfile& o);
};

void set_thread_profiling(bool on);  // (and resets the totals)
bool thread_profiling();
// The totals since the last reset.
ThreadProfile thread_profile();
void reset_thread_profile();

// For the pool: one call of `threads` threads (busy_s[t]: thread t's seconds inside it).
void record_pool_call(double wall_s, const double* busy_s, int threads, int64_t chunks);
// For the quantized GEMM driver: one wave of shared activation preparation.
void record_shared_acts(double wall_s);

}  // namespace deepinfer
