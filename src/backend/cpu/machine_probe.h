// Machine limits measured the way the kernels use the machine, for bench-ops: streaming read bandwidth
// with all threads, and peak FLOP/s of fp32 FMAs and bf16 dot products (vdpbf16ps) per ISA, and of AMX tiles.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace deepinfer::backend::cpu {

// Whether the ISA's kernels (and probes) run on this CPU.
bool isa_supported(Isa isa);

// GB/s of a pass over buf (64-byte aligned, bytes a multiple of 256), split over the pool's threads: the faster of
// a plain pass and one that requests each line ahead into L2.
double measure_read_gbps(Isa isa, const uint8_t* buf, size_t bytes, ThreadPool& pool);

// GFLOP/s of dependency-free vector loops on every thread of the pool: fp32 FMA (2 flops per lane) or
// bf16 dot products (4 flops per fp32 lane: two multiply-adds; the fp32 FMA loop on AVX2).
double measure_peak_gflops(Isa isa, bool bf16_dot, ThreadPool& pool);
// The floating-point operations each thread performs in one measure_peak_gflops call.
double peak_probe_flops_per_thread(Isa isa, bool bf16_dot);

// The peak of the math a kernel table's GEMMs run on (bench-ops' %peak, bench-decode --op-profile's rooflines): fp32
// FMAs for fp32 math; for the others the AMX tile peak where the AVX-512 table runs on tiles, else the bf16-dot peak
// (the FMA loop on the AVX2 table). The scalar table is held to the best vector ISA's probes here.
double measure_table_peak_gflops(Isa table, bool fp32_math, ThreadPool& pool);

// The median of three runs of a probe (the machine is shared).
template <class Probe>
double median_of_3(Probe&& probe) {
    double v[3] = {probe(), probe(), probe()};
    std::sort(v, v + 3);
    return v[1];
}

// GFLOP/s of tdpbf16ps on tiles held in registers on every thread of the pool: the AMX tile peak, the ceiling of
// the AVX-512 table's kernels that run on tiles; 0 where amx_enabled() is false.
double measure_tile_peak_gflops(ThreadPool& pool);
// The floating-point operations each thread performs in one measure_tile_peak_gflops call.
double tile_probe_flops_per_thread();
// Whether this machine has the tile peak (amx_enabled() and the AVX-512 table runs here).
bool tile_peak_available();

// The pool's hand-off: microseconds for run_on_all of an empty task (published to every worker and waited for),
// medians over `calls` calls back to back (the workers polling) and over calls `idle_us` apart (past the workers'
// poll window: they blocked and are woken through the kernel). A decode step makes ~50 pool calls a layer;
// where wake-ups are slow (a 16-vCPU Firecracker guest: 170-250 us against 25-55 us on 2-vCPU KVM guests) a step
// with gaps between its calls pays them. 0 and 0 for a pool of one thread. reached: the fewest threads any timed
// call ran its task on (the pool's size when every call was a full hand-off).
struct PoolHandoff {
    double polling_us, woken_us;
    int reached;
};
PoolHandoff measure_pool_handoff(ThreadPool& pool, int calls = 2000, int idle_calls = 50, int idle_us = 3000);

}  // namespace deepinfer::backend::cpu
