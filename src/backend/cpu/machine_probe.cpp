// Timing of the ISA probe loops over the ThreadPool (see machine_probe.h).
#include "backend/cpu/machine_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "backend/cpu/x86/isa_ops.h"
#include "backend/kernels.h"

namespace deepinfer::backend::cpu {
namespace {

const IsaOps& ops_for(Isa isa) { return isa == Isa::kAvx512 ? avx512_ops() : avx2_ops(); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool isa_supported(Isa isa) {
    switch (isa) {
        case Isa::kScalar: return true;
        case Isa::kAvx2: return avx2_kernels() != nullptr;
        case Isa::kAvx512: return avx512_kernels() != nullptr;
    }
    return false;
}

double measure_read_gbps(Isa isa, const uint8_t* buf, size_t bytes, ThreadPool& pool) {
    const IsaOps& ops = ops_for(isa == Isa::kScalar ? Isa::kAvx2 : isa);
    const size_t blocks = bytes / 256;
    std::atomic<uint64_t> sink{0};
    // One pass each without and with the L2 prefetch: which reads faster depends on the machine (probe_avx512.cpp).
    double best = 0;
    for (const bool ahead : {false, true}) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(blocks, [&](size_t b, size_t e, int) {
            sink += ops.read_stream(buf + b * 256, (e - b) * 256, ahead);
        });
        best = std::max(best, static_cast<double>(blocks * 256) / seconds_since(t0) / 1e9);
    }
    return sink.load() == 1 ? 0.0 : best;  // sink keeps the reads alive
}

namespace {
constexpr int64_t kProbeIters = 20'000'000;
}  // namespace

double peak_probe_flops_per_thread(Isa isa, bool bf16_dot) {
    const IsaOps& ops = ops_for(isa == Isa::kScalar ? Isa::kAvx2 : isa);
    const bool real_dot = bf16_dot && isa == Isa::kAvx512;
    return 12.0 * ops.vector_floats * (real_dot ? 4.0 : 2.0) * static_cast<double>(kProbeIters);
}

double measure_peak_gflops(Isa isa, bool bf16_dot, ThreadPool& pool) {
    const IsaOps& ops = ops_for(isa == Isa::kScalar ? Isa::kAvx2 : isa);
    const bool real_dot = bf16_dot && isa == Isa::kAvx512;
    const int64_t iters = kProbeIters;
    std::atomic<int> sink{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.run_on_all([&](int) {
        const float r = real_dot ? ops.dot_loop(iters) : ops.fma_loop(iters);
        if (r == 1.2345f) ++sink;
    });
    const double s = seconds_since(t0);
    return peak_probe_flops_per_thread(isa, bf16_dot) * pool.size() / s / 1e9 + sink.load();
}

double measure_table_peak_gflops(Isa table, bool fp32_math, ThreadPool& pool) {
    const bool avx512 = table != Isa::kAvx2 && best_isa() == Isa::kAvx512 && isa_supported(Isa::kAvx512);
    const Isa probe = avx512 ? Isa::kAvx512 : Isa::kAvx2;
    if (!fp32_math && table == Isa::kAvx512 && tile_peak_available()) return measure_tile_peak_gflops(pool);
    return measure_peak_gflops(probe, !fp32_math, pool);
}

namespace {
// 4 products of 16 x 16 x 32 (2 flops each) per iteration: ~64 M cycles at one product per 16 cycles.
constexpr int64_t kTileProbeIters = 1'000'000;
}  // namespace

bool tile_peak_available() { return avx512_kernels() != nullptr && amx_enabled() && avx512_ops().tile_loop; }

double tile_probe_flops_per_thread() { return 4.0 * 16 * 16 * 32 * 2 * static_cast<double>(kTileProbeIters); }

double measure_tile_peak_gflops(ThreadPool& pool) {
    if (!tile_peak_available()) return 0.0;
    std::atomic<int> sink{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.run_on_all([&](int) {
        if (avx512_ops().tile_loop(kTileProbeIters) == 1.2345f) ++sink;
    });
    const double s = seconds_since(t0);
    return tile_probe_flops_per_thread() * pool.size() / s / 1e9 + sink.load();
}

PoolHandoff measure_pool_handoff(ThreadPool& pool, int calls, int idle_calls, int idle_us) {
    if (pool.size() == 1) return {0.0, 0.0, 1};
    int reached = pool.size();
    auto median_us = [&](int count, int gap_us) {
        std::vector<double> us(static_cast<size_t>(count));
        for (double& u : us) {
            if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
            std::atomic<int> ran{0};
            const auto t0 = std::chrono::steady_clock::now();
            pool.run_on_all([&](int) { ran.fetch_add(1, std::memory_order_relaxed); });
            u = seconds_since(t0) * 1e6;
            reached = std::min(reached, ran.load());
        }
        std::nth_element(us.begin(), us.begin() + count / 2, us.end());
        return us[static_cast<size_t>(count / 2)];
    };
    const double polling = median_us(calls, 0), woken = median_us(idle_calls, idle_us);
    return {polling, woken, reached};
}

}  // namespace deepinfer::backend::cpu
