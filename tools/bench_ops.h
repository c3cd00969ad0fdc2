// Pieces of `deepinfer bench-ops` shared by its files (cmd_bench_ops.cpp, bench_rowwise.cpp).
#pragma once

#include <functional>

namespace deepinfer::cli {

// Seconds of this thread's CPU time per call of f: the best of 5 rounds of >= 60 ms of calls, after one
// warm-up call (time the thread was not running is not counted: robust on a shared machine).
double cpu_seconds_per_call(const std::function<void()>& f);

// `bench-ops --rowwise`: the row-wise ops of every kernel table this CPU runs, side by side. Prints one line
// per op and shape: microseconds per call of each table on one thread (inputs in cache) and the speed-up of
// the fastest SIMD table over the scalar reference. Returns 0.
int run_rowwise_bench();

}  // namespace deepinfer::cli
