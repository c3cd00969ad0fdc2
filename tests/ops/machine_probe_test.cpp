// The machine probes bench-ops measures the kernels against: the AMX tile probe must do the products it counts
// (its sums checked exactly), and report a peak only where the tiles run.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/machine_probe.h"
#include "backend/cpu/x86/isa_ops.h"
#include "backend/kernels.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu {
namespace {

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

}  // namespace
}  // namespace deepinfer::backend::cpu
