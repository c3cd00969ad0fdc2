// `deepinfer bench-ops --rowwise`: the row-wise ops of every kernel table this CPU runs, side by side.
#pragma once

namespace deepinfer::cli {

// Prints one line per op and shape: microseconds per call of each table on one thread (thread CPU time,
// inputs in cache) and the speed-up of the fastest SIMD table over the scalar reference. Returns 0.
int run_rowwise_bench();

}  // namespace deepinfer::cli
