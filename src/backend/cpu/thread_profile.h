// Where the kernels' threads spend a parallel call (off by default; `deepinfer bench-ops --thread-profile`).
// Every for_chunks call -- the GEMM drivers' work units, attention's heads, the row-wise ops' rows -- adds its wall
// time, its chunks and each thread's time inside them; the quantized GEMMs' shared activation preparation
// (cpu_gemm_quant.cpp) adds its wall time apart. That tells apart the three ways a many-core call falls short of
// its threads' sum: threads idle at the end (balance: the busiest thread against the mean), threads not inside
// the work (hand-off, claims: the busiest thread against the wall time), and threads busy but slow (compare the
// thread time per call with `bench-ops --in-cache`). Costs two clock reads per chunk and a lock per call when on.
#pragma once

#include <cstdint>

namespace deepinfer::backend::cpu {

struct ThreadProfile {
    int64_t calls = 0;         // for_chunks calls
    int64_t chunks = 0;        // the chunks they ran
    int threads = 0;           // the largest pool that ran one
    double wall_s = 0;         // their wall time, summed over calls
    double busy_s = 0;         // every thread's time inside a chunk, summed over threads and calls
    double busiest_s = 0;      // per call the busiest thread's time inside chunks, summed over calls
    double shared_acts_s = 0;  // wall time of the quantized GEMMs' activations made ready once for all threads
    int64_t shared_waves = 0;  // ... in how many waves

    ThreadProfile& operator+=(const ThreadProfile& o);
};

void set_thread_profiling(bool on);
bool thread_profiling();
// The totals since the last reset (or since profiling was turned on).
ThreadProfile thread_profile();
void reset_thread_profile();

// For the drivers: one for_chunks call (per-thread busy seconds of `threads` threads), one shared preparation.
void record_chunks_call(double wall_s, const double* busy_s, int threads, int64_t chunks);
void record_shared_acts(double wall_s);

}  // namespace deepinfer::backend::cpu
