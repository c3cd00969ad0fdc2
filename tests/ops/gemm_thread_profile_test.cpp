// bench-ops --thread-profile's records (core/thread_profile.h): each for_chunks call counted once with its
// chunks and threads, busy time bounded by the threads' wall time, the quantized GEMMs' shared activation
// preparation recorded where it runs; nothing recorded while off; the calls' results unchanged by profiling.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "backend/cpu/drivers.h"
#include "backend/kernels.h"
#include "core/cpu_features.h"
#include "core/thread_profile.h"
#include "core/thread_pool.h"

namespace deepinfer::backend::cpu {
namespace {

// Profiling is process-wide: each test leaves it off.
struct ProfilingOn {
    ProfilingOn() { set_thread_profiling(true); }
    ~ProfilingOn() { set_thread_profiling(false); }
};

// fn's work: a sum every chunk adds to, so that every index is seen to run once.
void run_indices(ThreadPool& pool, int64_t n, int64_t chunk, std::vector<std::atomic<int>>& seen) {
    for_chunks(pool, n, chunk, [](int) {}, [&](int64_t b, int64_t e, int) {
        volatile double x = 0;  // a little work inside the chunk, so that busy time is not all clock reads
        for (int64_t i = b; i < e; ++i) {
            for (int j = 0; j < 20000; ++j) x = x + 1.0;
            seen[static_cast<size_t>(i)].fetch_add(1);
        }
    });
}

TEST(GemmThreadProfile, ForChunksCallsChunksAndBusyTime) {
    ProfilingOn on;
    for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        reset_thread_profile();
        std::vector<std::atomic<int>> seen(37);
        run_indices(pool, 37, 4, seen);
        run_indices(pool, 37, 4, seen);
        for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), 2) << i;
        const ThreadProfile p = thread_profile();
        EXPECT_EQ(p.calls, 2);
        EXPECT_EQ(p.chunks, threads == 1 ? 2 : 2 * 10);  // a pool of one thread runs fn once over all of it
        EXPECT_EQ(p.threads, threads);
        EXPECT_GT(p.busiest_s, 0.0);
        EXPECT_LE(p.busiest_s, p.wall_s);  // (one clock: each chunk lies within its call)
        EXPECT_GE(p.busy_s, p.busiest_s);
        EXPECT_LE(p.busy_s, p.wall_s * threads);
        if (threads == 1) {
            EXPECT_EQ(p.busy_s, p.busiest_s);
        }
        EXPECT_EQ(p.shared_waves, 0);
    }
}

// An fp8 GEMM's operands from a seed: weight codes without NaN, [rows/32][k/32] weight scales, n activation rows.
struct Fp8Operands {
    std::vector<uint8_t> codes, scales, acts, act_scales;
    Fp8Operands(int64_t n, int64_t rows, int64_t k, uint32_t seed)
        : codes(rows * k), scales((rows / 32) * (k / 32)), acts(n * k), act_scales(n * (k / 32)) {
        auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
        for (uint8_t& c : codes) c = static_cast<uint8_t>(next() >> 24) & 0x7e;  // no e4m3 NaN
        for (uint8_t& c : acts) c = static_cast<uint8_t>(next() >> 24) & 0xf6;
        for (uint8_t& s : scales) s = static_cast<uint8_t>(118 + next() % 10);
        for (uint8_t& s : act_scales) s = static_cast<uint8_t>(118 + next() % 10);
    }
};

// A GEMM whose threads each have few weight rows makes its activations ready once (cpu_gemm_quant.cpp): the
// profile counts that wave's call and the units' call, and the outputs are those of the unprofiled call.
TEST(GemmThreadProfile, SharedActivationsOfAQuantGemm) {
    constexpr int64_t n = 64, rows = 512, k = 256;
    Fp8Operands op(n, rows, k, 12345);
    auto& [codes, scales, acts, act_scales] = op;
    const Kernels& kernels = active_kernels();
    ThreadPool pool(3);
    PackedWeight packed;
    Fp8Matrix w{codes.data(), scales.data(), rows, k};
    if (kernels.prepare_fp8) {
        kernels.prepare_fp8(w, &packed, pool);
        if (packed.layout != PackedLayout::kNone) w.prepared = &packed;
    }
    const Fp8Acts a{acts.data(), act_scales.data(), n, k};
    std::vector<bf16> plain(n * rows), profiled(n * rows);
    kernels.gemm_fp8(a, w, plain.data(), rows, pool);
    {
        ProfilingOn on;
        kernels.gemm_fp8(a, w, profiled.data(), rows, pool);
        const ThreadProfile p = thread_profile();
        if (kernels.isa == Isa::kScalar) {  // the reference table runs its GEMMs without the drivers
            EXPECT_EQ(p.calls, 0);
        } else {
            EXPECT_EQ(p.calls, 2);
            EXPECT_GT(p.chunks, 3);
            EXPECT_EQ(p.threads, 3);
            EXPECT_EQ(p.shared_waves, 1);
            EXPECT_GT(p.shared_acts_s, 0.0);
        }
    }
    for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(plain[i].bits, profiled[i].bits) << i;
}

// An fp8 GEMM of more than 16 rows on AMX tiles reads all of its item's activations once per unit's run of pairs, so
// its units hold about kTileRunPairs pairs each, a multiple of the thread count of them (tile_gemm_units): 520 pairs
// on 16 threads make 16 x ceil(520 / 128) = 80 units, where units sized by the call were 144 (3-4 pairs each). Too
// many rows a thread for shared activations, so the units' call is the only one. Outputs as with 2 threads.
TEST(GemmThreadProfile, TileGemmUnitsHoldWholeRuns) {
    const Kernels& kernels = active_kernels();
    if (kernels.isa != Isa::kAvx512 || !amx_enabled()) GTEST_SKIP() << "the fp8 GEMM on AMX tiles does not run here";
    constexpr int64_t n = 64, rows = 16640, k = 256;
    Fp8Operands op(n, rows, k, 54321);
    auto& [codes, scales, acts, act_scales] = op;
    ThreadPool pool(16), two(2);
    PackedWeight packed;
    Fp8Matrix w{codes.data(), scales.data(), rows, k};
    kernels.prepare_fp8(w, &packed, pool);
    ASSERT_NE(packed.layout, PackedLayout::kNone);
    w.prepared = &packed;
    const Fp8Acts a{acts.data(), act_scales.data(), n, k};
    std::vector<bf16> out(n * rows), out_two(n * rows);
    {
        ProfilingOn on;
        reset_thread_profile();
        kernels.gemm_fp8(a, w, out.data(), rows, pool);
        const ThreadProfile p = thread_profile();
        EXPECT_EQ(p.shared_waves, 0);
        EXPECT_EQ(p.calls, 1);
        EXPECT_EQ(p.chunks, 80);
    }
    kernels.gemm_fp8(a, w, out_two.data(), rows, two);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i].bits, out_two[i].bits) << i;
}

}  // namespace
}  // namespace deepinfer::backend::cpu
