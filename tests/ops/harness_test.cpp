// The op harness must be able to fail: out-of-bounds writes, skipped outputs, written padding, and
// results outside an error budget are each detected on a deliberately broken kernel.
#include <gtest/gtest.h>

#include "backend/kernels.h"
#include "op_harness.h"

namespace deepinfer::testing {
namespace {

// The reference bf16 linear, then `damage` applied to its output buffer.
template <class Damage>
Output2d<bf16> broken_gemm(int64_t n, int64_t rows, int64_t k, int64_t ldo, Damage damage, std::vector<bf16>* clean) {
    Inputs in(1);
    std::vector<bf16> x = in.bf16s(n * k), w = in.bf16s(rows * k);
    ThreadPool pool(1);
    Output2d<bf16> out(n, rows, ldo);
    backend::ref::kernels().gemm_bf16(x.data(), n, backend::Bf16Matrix{w.data(), rows, k}, out.data(), ldo, pool);
    clean->assign(out.data(), out.data() + out.buf.size());
    damage(out.data());
    return out;
}

TEST(OpHarness, DetectsWritePastTheEnd) {
    std::vector<bf16> clean;
    auto out = broken_gemm(
        3, 5, 32, 5, [](bf16* o) { o[15] = bf16{0x3f80}; }, &clean);
    EXPECT_FALSE(out.buf.guards_intact());
    EXPECT_NE(out.integrity(), "");
}

TEST(OpHarness, DetectsWriteBeforeTheStart) {
    std::vector<bf16> clean;
    auto out = broken_gemm(
        2, 4, 32, 4, [](bf16* o) { o[-1] = bf16{0}; }, &clean);
    EXPECT_FALSE(out.buf.guards_intact());
}

TEST(OpHarness, DetectsPaddingWriteAndSkippedOutput) {
    std::vector<bf16> clean;
    auto padded = broken_gemm(
        3, 5, 32, 7, [](bf16* o) { o[7 + 5] = bf16{0}; }, &clean);
    EXPECT_NE(padded.integrity().find("padding"), std::string::npos);
    auto skipped = broken_gemm(
        3, 5, 32, 7, [](bf16* o) { std::memset(o + 8, Guarded<bf16>::kPattern, 2); }, &clean);
    EXPECT_NE(skipped.integrity().find("not written"), std::string::npos);
}

TEST(OpHarness, DetectsErrorsOutsideTheUlpBudget) {
    const int64_t n = 4, rows = 100, k = 64;
    std::vector<bf16> clean;
    // one output off by 2 ulps
    auto two = broken_gemm(
        n, rows, k, rows, [](bf16* o) { o[17].bits += 2; }, &clean);
    EXPECT_NE(check_ulps(compare_bf16(clean.data(), rows, two.data(), rows, n, rows), UlpBudget{1, 0.002}), "");
    // 5% of outputs off by 1 ulp: within max_ulps, over the mismatch rate
    auto many = broken_gemm(
        n, rows, k, rows,
        [](bf16* o) {
            for (int e = 0; e < 400; e += 20) o[e].bits += 1;
        },
        &clean);
    const UlpStats s = compare_bf16(clean.data(), rows, many.data(), rows, n, rows);
    EXPECT_EQ(s.worst, 1);
    EXPECT_NE(check_ulps(s, UlpBudget{1, 0.002}), "");
    EXPECT_EQ(check_ulps(s, UlpBudget{1, 0.1}), "");
    // an exact budget rejects a single 1-ulp difference
    auto one = broken_gemm(
        n, rows, k, rows, [](bf16* o) { o[3].bits += 1; }, &clean);
    EXPECT_NE(check_ulps(compare_bf16(clean.data(), rows, one.data(), rows, n, rows), UlpBudget{0, 0.0}), "");
}

// The tables under test: scalar is the reference itself; every SIMD entry is set; AVX2 is always there on
// the x86-64-v3 baseline, and AVX-512 whenever cpuid reports f/bw/vl/dq + bf16 + vbmi.
TEST(OpHarness, TablesAreComplete) {
    EXPECT_EQ(&backend::kernels_for(Isa::kScalar), &backend::ref::kernels());
    const CpuFeatures& f = cpu_features();
    const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16 && f.avx512_vbmi;
    EXPECT_EQ(simd_tables().size(), avx512 ? 2u : 1u);
    for (const backend::Kernels* k : simd_tables()) {
        SCOPED_TRACE(std::string(isa_name(k->isa)));
        EXPECT_TRUE(k->prepare_fp8 && k->prepare_fp4 && k->prepare_bf16 && k->act_quant && k->gemm_fp8 && k->gemm_fp8_bf16x && k->gemm_fp8_bf16x_grouped && k->gemm_fp4 && k->gemm_fp4_grouped && k->gemm_bf16 &&
                    k->gemm_f32_bf16w && k->gemm_f32 && k->gemm_f32_squares && k->sparse_attn && k->index_scores &&
                    k->index_scores_fp4);
    }
}

TEST(OpHarness, UlpDistanceAcrossZeroAndNan) {
    EXPECT_EQ(bf16_ulps(float_to_bf16(0.0f), float_to_bf16(-0.0f)), 0);
    EXPECT_EQ(bf16_ulps(bf16{0x0001}, bf16{0x8001}), 2);
    EXPECT_GT(bf16_ulps(bf16{0x7fc0}, float_to_bf16(1.0f)), 1000);
    EXPECT_EQ(bf16_ulps(bf16{0x7fc0}, bf16{0xffc1}), 0);
}

}  // namespace
}  // namespace deepinfer::testing
