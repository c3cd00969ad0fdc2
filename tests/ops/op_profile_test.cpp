// The op profile bench-decode prints (`--op-profile`): each ops::linear_* call counted once under its kind and shape,
// with the weight bytes it reads and the flops it does (2 x weight elements x activation rows, summed over a group's
// GEMMs), marked fp32 math where its kernels multiply in fp32 -- what the profile's rooflines are computed from.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/numeric.h"
#include "ops/linear.h"
#include "ops/op_profile.h"

namespace deepinfer::ops {
namespace {

const OpStat* find(const std::vector<OpStat>& stats, const std::string& name) {
    for (const OpStat& s : stats)
        if (s.name == name) return &s;
    return nullptr;
}

class OpProfile : public ::testing::Test {
   protected:
    void TearDown() override {
        set_op_profiling(false);
        reset_op_profile();
    }
};

TEST_F(OpProfile, CountsBytesAndFlopsPerKindAndShape) {
    constexpr int64_t kRows = 64, kCols = 32;
    std::vector<bf16> wb(kRows * kCols), x(3 * kCols);
    for (size_t i = 0; i < wb.size(); ++i) wb[i] = float_to_bf16(static_cast<float>(i % 7) - 3.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float_to_bf16(static_cast<float>(i % 5) * 0.25f);
    std::vector<float> xf(2 * kCols, 0.5f), yf(2 * kRows);
    std::vector<bf16> y(3 * kRows);
    const Bf16Matrix w{wb.data(), kRows, kCols};

    reset_op_profile();
    linear_bf16(x.data(), 3, w, y.data());  // profiling off: not counted
    EXPECT_TRUE(op_profile().empty());

    set_op_profiling(true);
    linear_bf16(x.data(), 3, w, y.data());
    linear_bf16(x.data(), 3, w, y.data());
    linear_bf16(x.data(), 1, w, y.data());
    linear_f32(xf.data(), 2, w, yf.data());
    // two wo_a-like GEMMs of 1 and 3 rows on fp8 weights (e4m3 codes, e8m0 scales 2^0), in one dispatch
    std::vector<uint8_t> codes(kRows * kCols, 0x38), scales((kRows / 32) * (kCols / 32), 127);
    const Fp8Matrix w8{codes.data(), scales.data(), kRows, kCols};
    std::vector<bf16> y8(4 * kRows);
    linear_fp8_bf16x_grouped({{x.data(), 1, kCols, w8, y8.data(), kRows}, {x.data(), 3, kCols, w8, y8.data() + kRows, kRows}});
    set_op_profiling(false);
    linear_bf16(x.data(), 3, w, y.data());  // off again: not counted
    const std::vector<OpStat> stats = op_profile();

    const double elements = static_cast<double>(kRows) * kCols;
    ASSERT_EQ(stats.size(), 4u);
    const OpStat* bf3 = find(stats, "bf16 64x32 n3");
    ASSERT_NE(bf3, nullptr);
    EXPECT_EQ(bf3->calls, 2);
    EXPECT_DOUBLE_EQ(bf3->bytes, 2 * 2 * elements);
    EXPECT_DOUBLE_EQ(bf3->flops, 2 * 2 * elements * 3);
    EXPECT_FALSE(bf3->fp32_math);
    const OpStat* bf1 = find(stats, "bf16 64x32 n1");
    ASSERT_NE(bf1, nullptr);
    EXPECT_EQ(bf1->calls, 1);
    EXPECT_DOUBLE_EQ(bf1->flops, 2 * elements);
    const OpStat* f32 = find(stats, "f32 x bf16 64x32 n2");
    ASSERT_NE(f32, nullptr);
    EXPECT_DOUBLE_EQ(f32->flops, 2 * elements * 2);
    EXPECT_TRUE(f32->fp32_math);
    const OpStat* group = find(stats, "fp8 (bf16 x) grouped 2x mixed shapes");
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->calls, 1);
    EXPECT_DOUBLE_EQ(group->bytes, 2 * (elements + 2 * 1));  // codes and the 2 x 1 blocks' scales, twice
    EXPECT_DOUBLE_EQ(group->flops, 2 * elements * (1 + 3));
    EXPECT_FALSE(group->fp32_math);
    for (const OpStat& s : stats) EXPECT_GT(s.seconds, 0.0) << s.name;
}

}  // namespace
}  // namespace deepinfer::ops
