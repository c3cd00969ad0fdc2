// The machine probes bench-ops measures the kernels against: the read probe must read every byte it counts in both
// of its passes, the AMX tile probe must do the products it counts (their sums checked exactly), and each reports a
// figure only where it runs; the pool hand-off probe reports one for each kind of call.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/machine_probe.h"
#include "backend/cpu/x86/isa_ops.h"
#include "backend/kernels.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu {
namespace {

TEST(MachineProbe, ReadStreamSumsEveryWordInBothPasses) {
    // 64-bit words i * 0x9e3779b97f4a7c15 (distinct high and low bits): the probe's sum is theirs modulo 2^64
    constexpr size_t kBytes = 256 * 37;
    alignas(64) static uint8_t buf[kBytes];
    uint64_t expect = 0;
    for (size_t i = 0; i < kBytes / 8; ++i) {
        const uint64_t v = (i + 1) * 0x9e3779b97f4a7c15ull;
        std::memcpy(buf + 8 * i, &v, 8);
        expect += v;
    }
    if (avx2_kernels() == nullptr) GTEST_SKIP() << "no AVX2 here";
    std::vector<const IsaOps*> tables{&avx2_ops()};
    if (avx512_kernels() != nullptr) tables.push_back(&avx512_ops());
    for (const IsaOps* ops : tables)
        for (const bool ahead : {false, true}) EXPECT_EQ(ops->read_stream(buf, kBytes, ahead), expect) << ahead;
    ThreadPool pool(2);
    EXPECT_GT(measure_read_gbps(Isa::kAvx2, buf, kBytes, pool), 0.0);
}

TEST(MachineProbe, TileLoopDoesTheProductsItCounts) {
    if (!tile_peak_available()) GTEST_SKIP() << "no AMX tiles here (or DEEPINFER_AMX=off)";
    // C tile 0 gains one product per iteration: 32 terms of 1.0 x 2^-24, 2^-19 (exact in fp32 up to 2^24 iterations)
    for (int64_t iters : {1, 7, 1000, 123457})
        EXPECT_EQ(avx512_ops().tile_loop(iters), std::ldexp(static_cast<float>(iters), -19)) << iters;
}

TEST(MachineProbe, TilePeakOnlyWhereTilesRun) {
    ThreadPool pool(1);
    const double gflops = measure_tile_peak_gflops(pool);
    EXPECT_EQ(tile_peak_available(), amx_enabled() && avx512_kernels() != nullptr);
    if (tile_peak_available()) EXPECT_GT(gflops, 0.0);
    else EXPECT_EQ(gflops, 0.0);
}

// The hand-off probe times full hand-offs (every call reaches every thread), reports a time for each kind of call
// (no bound on it: the machines are shared), none for a pool of one thread, and leaves the pool working.
TEST(MachineProbe, PoolHandoffMeasuresBothKinds) {
    ThreadPool one(1);
    const PoolHandoff none = measure_pool_handoff(one, 10, 2, 100);
    EXPECT_EQ(none.polling_us, 0.0);
    EXPECT_EQ(none.woken_us, 0.0);
    ThreadPool pool(3);
    const PoolHandoff h = measure_pool_handoff(pool, 50, 3, 2000);
    EXPECT_TRUE(std::isfinite(h.polling_us) && h.polling_us > 0.0) << h.polling_us;
    EXPECT_TRUE(std::isfinite(h.woken_us) && h.woken_us > 0.0) << h.woken_us;
    EXPECT_EQ(h.reached, 3);  // a probe on run_on_available would time calls the workers may skip
    std::atomic<int> mask{0};
    pool.run_on_all([&](int t) { mask.fetch_or(1 << t); });
    EXPECT_EQ(mask.load(), 0x7);
}

}  // namespace
}  // namespace deepinfer::backend::cpu
