// act_quant (spec §4.2) of every SIMD table: codes and scales byte-identical to the reference, on random
// rows with widely spread group magnitudes and on hand-made groups hitting rounding ties, subnormal e4m3
// codes, saturation, zero groups (amax floor), bf16 denormals, NaN and infinity.
#include <gtest/gtest.h>

#include <limits>

#include "backend/kernels.h"
#include "op_harness.h"

namespace deepinfer::testing {
namespace {

void check_rows(const std::vector<bf16>& x, int64_t n, int64_t k) {
    ThreadPool ref_pool(1);
    std::vector<uint8_t> ref_codes(n * k), ref_scales(n * k / 32);
    backend::ref::kernels().act_quant(x.data(), n, k, ref_codes.data(), ref_scales.data(), ref_pool);
    for (const backend::Kernels* table : simd_tables())
        for (int threads : {1, 3}) {
            SCOPED_TRACE(std::string(isa_name(table->isa)) + " threads=" + std::to_string(threads) +
                         " n=" + std::to_string(n) + " k=" + std::to_string(k));
            ThreadPool pool(threads);
            Guarded<uint8_t> codes(n * k), scales(n * k / 32);
            table->act_quant(x.data(), n, k, codes.data(), scales.data(), pool);
            EXPECT_TRUE(codes.guards_intact());
            EXPECT_TRUE(scales.guards_intact());
            int64_t bad = 0;
            for (int64_t i = 0; i < n * k; ++i)
                if (codes.data()[i] != ref_codes[i] && bad++ < 5)
                    ADD_FAILURE() << "code " << i << ": x=" << bf16_to_float(x[i]) << " ref " << int(ref_codes[i])
                                  << " got " << int(codes.data()[i]);
            for (int64_t g = 0; g < n * k / 32; ++g)
                if (scales.data()[g] != ref_scales[g] && bad++ < 10)
                    ADD_FAILURE() << "scale " << g << ": ref " << int(ref_scales[g]) << " got "
                                  << int(scales.data()[g]);
            EXPECT_EQ(bad, 0);
        }
}

TEST(ActQuant, RandomRows) {
    Inputs in(11);
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {3, 96}, {17, 5120}, {2, 8192}}) {
        std::vector<bf16> x(n * k);
        for (int64_t g = 0; g < n * k / 32; ++g) {
            const float mag = std::ldexp(1.0f, in.uniform_int(-30, 30));
            for (int j = 0; j < 32; ++j) x[g * 32 + j] = float_to_bf16(in.uniform(-mag, mag));
        }
        check_rows(x, n, k);
    }
}

// Groups whose amax is 448 * 2^e exactly, so s = 2^e and every other element lands on a chosen x / s.
TEST(ActQuant, TiesSubnormalsAndSpecials) {
    Inputs in(12);
    std::vector<std::vector<float>> groups;
    // midpoints between neighbouring e4m3 values (normal and subnormal), both signs, at several scales
    std::vector<float> values;
    for (int c = 0; c < 0x7e; ++c) {
        const float lo = e4m3_to_float(static_cast<uint8_t>(c)), hi = e4m3_to_float(static_cast<uint8_t>(c + 1));
        values.push_back(0.5f * (lo + hi));
        values.push_back(lo);
    }
    for (int e : {-20, -3, 0, 7, 40}) {
        const float s = std::ldexp(1.0f, e);
        for (size_t v0 = 0; v0 < values.size(); v0 += 31) {
            std::vector<float> g(32);
            g[0] = 448.0f * s;
            for (int j = 1; j < 32; ++j) {
                const float v = values[(v0 + j) % values.size()] * s;
                g[j] = (j & 1) ? -v : v;
            }
            groups.push_back(g);
        }
    }
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    groups.push_back(std::vector<float>(32, 0.0f));                    // amax floor 1e-4
    groups.push_back(std::vector<float>(32, std::ldexp(1.0f, -130)));  // bf16 denormals
    std::vector<float> with_nan(32, 0.5f), with_inf(32, 0.25f), neg_zero(32, -0.0f), big(32, 3.0e38f);
    with_nan[3] = nan;
    with_inf[9] = -inf;
    neg_zero[0] = 1.0f;
    big[1] = -3.3e38f;
    for (auto* g : {&with_nan, &with_inf, &neg_zero, &big}) groups.push_back(*g);
    for (int r = 0; r < 8; ++r) {  // values just around a tie, with bf16's own rounding
        std::vector<float> g(32);
        for (auto& v : g) v = in.uniform(-1.0f, 1.0f) * std::ldexp(1.0f, in.uniform_int(-8, 8));
        groups.push_back(g);
    }
    std::vector<bf16> x;
    for (auto& g : groups)
        for (float v : g) x.push_back(float_to_bf16(v));
    check_rows(x, 1, static_cast<int64_t>(x.size()));
}

}  // namespace
}  // namespace deepinfer::testing
