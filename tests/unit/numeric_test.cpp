// Exhaustive tests of the numeric formats (spec §3.2, §4.2-§4.5): every fp8 and e2m1 code, the rounding
// ties, saturation, and the power-of-two scale rules, against brute-force nearest-value searches.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/numeric.h"
#include "core/quant_records.h"

namespace deepinfer {
namespace {

// Brute force: nearest finite e4m3 value to x (|x| <= 448), ties to the even code.
uint8_t nearest_e4m3(float x) {
    double best_err = std::numeric_limits<double>::infinity();
    int best = -1;
    for (int code = 0; code < 128; ++code) {
        if (code == 0x7f) continue;
        double err = std::fabs(static_cast<double>(std::fabs(x)) - e4m3_to_float(static_cast<uint8_t>(code)));
        if (err < best_err || (err == best_err && (code & 1) == 0)) {
            best_err = err;
            best = code;
        }
    }
    return static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

TEST(E4M3, DecodesAllCodes) {
    EXPECT_EQ(e4m3_to_float(0x00), 0.0f);
    EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
    EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
    EXPECT_EQ(e4m3_to_float(0x07), 7 * std::ldexp(1.0f, -9));
    EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
    EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
    EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
    EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
    EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
    EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
}

TEST(E4M3, RoundTripsEveryFiniteCode) {
    for (int code = 0; code < 256; ++code) {
        if ((code & 0x7f) == 0x7f) continue;
        EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(code))), code) << "code " << code;
    }
}

TEST(E4M3, MidpointsRoundToEvenCode) {
    for (int code = 0; code < 0x7e; ++code) {
        float lo = e4m3_to_float(static_cast<uint8_t>(code)), hi = e4m3_to_float(static_cast<uint8_t>(code + 1));
        float mid = (lo + hi) / 2;  // exact in fp32
        uint8_t even = (code % 2 == 0) ? code : code + 1;
        EXPECT_EQ(float_to_e4m3(mid), even) << "between codes " << code << " and " << code + 1;
        EXPECT_EQ(float_to_e4m3(-mid), even | 0x80);
        EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 0.0f)), code);
        EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 1e9f)), code + 1);
    }
}

TEST(E4M3, SaturatesAndHandlesNaN) {
    EXPECT_EQ(float_to_e4m3(448.0f), 0x7e);
    EXPECT_EQ(float_to_e4m3(460.0f), 0x7e);
    EXPECT_EQ(float_to_e4m3(1e30f), 0x7e);
    EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
    EXPECT_EQ(float_to_e4m3(std::nanf("")), 0x7f);
    EXPECT_EQ(float_to_e4m3(1e-30f), 0x00);
    EXPECT_EQ(float_to_e4m3(-1e-30f), 0x80);
}

TEST(E4M3, MatchesBruteForceOnRandomValues) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> exponent(-14.0f, 9.5f);
    for (int i = 0; i < 200000; ++i) {
        float x = std::exp2(exponent(rng)) * ((rng() & 1) ? 1.0f : -1.0f);
        x = std::fmin(std::fmax(x, -448.0f), 448.0f);
        ASSERT_EQ(float_to_e4m3(x), nearest_e4m3(x)) << x;
    }
}

TEST(E2M1, RoundTripsAllSixteenCodes) {
    for (int code = 0; code < 16; ++code) EXPECT_EQ(float_to_e2m1(e2m1_to_float(static_cast<uint8_t>(code))), code);
    EXPECT_EQ(e2m1_to_float(7), 6.0f);
    EXPECT_EQ(e2m1_to_float(15), -6.0f);
    EXPECT_EQ(e2m1_to_float(3), 1.5f);
}

TEST(E2M1, TiesFromSpec) {
    // spec §4.4: 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2.0, 2.5->2.0, 3.5->4.0, 5.0->4.0
    const float inputs[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const float expected[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
    for (int i = 0; i < 7; ++i) {
        EXPECT_EQ(e2m1_to_float(float_to_e2m1(inputs[i])), expected[i]) << inputs[i];
        EXPECT_EQ(e2m1_to_float(float_to_e2m1(-inputs[i])), -expected[i]) << -inputs[i];
    }
    EXPECT_EQ(float_to_e2m1(-0.0f), 8);  // sign of zero kept
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(0.2500001f)), 0.5f);
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(5.0001f)), 6.0f);
}

TEST(BF16, RoundsToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
    // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
    EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
    // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even).
    EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
    EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)).bits, 0x3f81);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
    EXPECT_EQ(float_to_bf16(3.4e38f).bits, 0x7f80);  // rounds up to infinity
}

TEST(E8M0, Decodes) {
    EXPECT_EQ(e8m0_to_float(127), 1.0f);
    EXPECT_EQ(e8m0_to_float(130), 8.0f);
    EXPECT_EQ(e8m0_to_float(120), std::ldexp(1.0f, -7));
    EXPECT_EQ(e8m0_to_float(0), std::ldexp(1.0f, -127));
    EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
}

// Independent formulation of the power-of-two scale: 2^ceil(log2(p)) with p the fp32 product.
float ceil_pow2(float p) {
    int e;
    float m = std::frexp(p, &e);  // p = m * 2^e, m in [0.5, 1)
    return m == 0.5f ? std::ldexp(1.0f, e - 1) : std::ldexp(1.0f, e);
}

TEST(ActQuant, ScaleIsCeilPowerOfTwo) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
    const float inv448 = 1.0f / 448.0f;
    for (int i = 0; i < 100000; ++i) {
        float amax = std::exp2(exponent(rng));
        float expected = ceil_pow2(std::fmax(amax, 1e-4f) * inv448);
        ASSERT_EQ(e8m0_to_float(act_quant_scale(amax)), expected) << amax;
    }
    // Floor: amax below 1e-4 uses 1e-4.
    EXPECT_EQ(act_quant_scale(0.0f), act_quant_scale(1e-4f));
    // 448 * fp32(1/448) is not exactly 1 in fp32 when the reciprocal rounds up: the rule then gives 2.
    float p = 448.0f * inv448;
    EXPECT_EQ(e8m0_to_float(act_quant_scale(448.0f)), p > 1.0f ? 2.0f : 1.0f);
}

TEST(ActQuant, GroupQuantizesWithinRangeAndQdqIsIdempotent) {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int trial = 0; trial < 1000; ++trial) {
        float x[32], y[32];
        for (float& v : x) v = round_to_bf16(normal(rng));
        uint8_t codes[32];
        uint8_t scale = act_quant_group(x, codes);
        float s = e8m0_to_float(scale);
        float amax = 0;
        for (float v : x) amax = std::fmax(amax, std::fabs(v));
        EXPECT_LE(amax / s, 448.0f);
        for (int i = 0; i < 32; ++i) {
            ASSERT_EQ(codes[i], nearest_e4m3(x[i] / s));
            y[i] = x[i];
        }
        act_qdq_group(y);
        float z[32];
        std::copy(y, y + 32, z);
        act_qdq_group(z);
        for (int i = 0; i < 32; ++i) ASSERT_EQ(y[i], z[i]);  // QDQ of a QDQ'd group is exact
    }
}

TEST(Fp4Qdq, IndexVariantUsesPow2ScaleOverSix) {
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.37f;
    uint8_t codes[32];
    float y[32];
    uint8_t scale = fp4_index_quant_group(x, codes, y);
    float amax = 16 * 0.37f;
    EXPECT_EQ(e8m0_to_float(scale), ceil_pow2(amax * (1.0f / 6.0f)));
    float s = e8m0_to_float(scale);
    for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(codes[i], float_to_e2m1(std::fmin(std::fmax(x[i] / s, -6.0f), 6.0f)));
        EXPECT_EQ(y[i], round_to_bf16(e2m1_to_float(codes[i]) * s));
    }
    // All-zero group: floor 6*2^-126 gives scale 2^-126 and zeros.
    float zeros[32] = {};
    EXPECT_EQ(e8m0_to_float(fp4_index_quant_group(zeros, codes, y)), std::ldexp(1.0f, -126));
    for (float v : y) EXPECT_EQ(v, 0.0f);
}

// Both fp4 QDQs against their plain definition -- code = float_to_e2m1(clamp(x / s, -6, 6)), y = bf16(e2m1(code) *
// s) -- over random groups with ties at every code boundary, values past 6 s, infinities, NaNs, signed zeros and
// subnormals (the quantizers compute it branch-free, vectorized).
TEST(Fp4Qdq, BothVariantsAreTheirDefinition) {
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, 15), expo(-140, 20);
    static constexpr float kBoundaries[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f};
    for (int trial = 0; trial < 4000; ++trial) {
        float x[32];
        const float base = std::ldexp(1.0f, expo(rng));
        for (float& v : x) v = uni(rng) * base;
        // ties: a group whose largest value makes the scale s, others at boundary multiples of s
        x[0] = 6.0f * base * (trial % 2 ? 1.0f : -1.0f);
        for (int i = 1; i < 32; ++i) {
            const int kind = pick(rng);
            if (kind < 5) x[i] = kBoundaries[pick(rng) % 9] * base * (pick(rng) % 2 ? 1.0f : -1.0f);
            else if (kind == 5 && trial % 7 == 0) x[i] = std::numeric_limits<float>::quiet_NaN();
            else if (kind == 6 && trial % 11 == 0) x[i] = -std::numeric_limits<float>::infinity();
            else if (kind == 7) x[i] = -0.0f;
            else if (kind == 8) x[i] = std::ldexp(uni(rng), -140);
        }
        for (int n : {32, 16}) {
            uint8_t codes[32], want_codes[32];
            float y[32];
            float s;
            if (n == 32) s = e8m0_to_float(fp4_index_quant_group(x, codes, y));
            else s = e4m3_to_float(fp4_kv_quant_group(x, codes, y));
            for (int i = 0; i < n; ++i) {
                want_codes[i] = float_to_e2m1(std::clamp(x[i] / s, -kE2M1Max, kE2M1Max));
                ASSERT_EQ(codes[i], want_codes[i]) << "n=" << n << " x=" << x[i] << " s=" << s;
                const float want = round_to_bf16(e2m1_to_float(want_codes[i]) * s);
                ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want)) << "n=" << n << " x=" << x[i];
            }
        }
    }
}

TEST(Fp4Qdq, KvVariantUsesE4M3ScalePerSixteen) {
    float x[16];
    for (int i = 0; i < 16; ++i) x[i] = std::sin(static_cast<float>(i)) * 2.3f;
    uint8_t codes[16];
    float y[16];
    uint8_t scale = fp4_kv_quant_group(x, codes, y);
    float amax = 0;
    for (float v : x) amax = std::fmax(amax, std::fabs(v));
    EXPECT_EQ(scale, float_to_e4m3(amax / 6.0f));
    float s = e4m3_to_float(scale);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(codes[i], float_to_e2m1(std::fmin(std::fmax(x[i] / s, -6.0f), 6.0f)));
    float zeros[16] = {};
    EXPECT_EQ(fp4_kv_quant_group(zeros, codes, y), float_to_e4m3(6.0f * std::ldexp(1.0f, -9) / 6.0f));
}

TEST(QuantRecords, RoundTripExactly) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    for (int dim : {64, 128, 512}) {
        std::vector<float> x(dim), qdq(dim), back(dim);
        for (float& v : x) v = round_to_bf16(normal(rng));
        std::vector<uint8_t> rec(window_record_bytes(dim));
        pack_window_record(x.data(), dim, rec.data(), qdq.data());
        unpack_window_record(rec.data(), dim, back.data());
        EXPECT_EQ(qdq, back);
        rec.assign(compressed_record_bytes(dim), 0);
        pack_compressed_record(x.data(), dim, rec.data(), qdq.data());
        unpack_compressed_record(rec.data(), dim, back.data());
        EXPECT_EQ(qdq, back);
        rec.assign(index_key_record_bytes(dim), 0);
        pack_index_key_record(x.data(), dim, rec.data(), qdq.data());
        unpack_index_key_record(rec.data(), dim, back.data());
        EXPECT_EQ(qdq, back);
    }
    EXPECT_EQ(window_record_bytes(512), 528u);
    EXPECT_EQ(compressed_record_bytes(512), 288u);
    EXPECT_EQ(index_key_record_bytes(128), 68u);
}

// The unpackers against the definition bf16(code x scale) for every code and every scale code (NaN codes
// included), in both output types.
TEST(QuantRecords, UnpackIsCodeTimesScaleForEveryCode) {
    auto same = [](float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (a != a && b != b); };
    for (int sc = 0; sc < 256; ++sc) {
        const auto scale = static_cast<uint8_t>(sc);
        // window: 256 codes over 8 groups of 32, each group with this scale
        std::vector<uint8_t> win(window_record_bytes(256));
        for (int i = 0; i < 256; ++i) win[i] = static_cast<uint8_t>(i);
        for (int g = 0; g < 8; ++g) win[256 + g] = scale;
        std::vector<float> f(256);
        std::vector<bf16> b(256);
        unpack_window_record(win.data(), 256, f.data());
        unpack_window_record(win.data(), 256, b.data());
        for (int i = 0; i < 256; ++i) {
            const float want = round_to_bf16(e4m3_to_float(static_cast<uint8_t>(i)) * e8m0_to_float(scale));
            ASSERT_TRUE(same(f[i], want)) << "window code " << i << " scale " << sc;
            ASSERT_TRUE(same(bf16_to_float(b[i]), want)) << "window code " << i << " scale " << sc;
        }
        // compressed (e4m3 scale per 16) and index key (e8m0 scale per 32): every nibble in every group
        for (bool index : {false, true}) {
            const int dim = 64, group = index ? kFp4IndexGroup : kFp4KvGroup;
            std::vector<uint8_t> rec(index ? index_key_record_bytes(dim) : compressed_record_bytes(dim));
            for (int i = 0; i < dim / 2; ++i) rec[i] = static_cast<uint8_t>((i % 8) * 2 | ((i % 8) * 2 + 1) << 4);
            for (int g = 0; g < dim / group; ++g) rec[dim / 2 + g] = scale;
            std::vector<float> ff(dim);
            std::vector<bf16> bb(dim);
            if (index) unpack_index_key_record(rec.data(), dim, ff.data()), unpack_index_key_record(rec.data(), dim, bb.data());
            else unpack_compressed_record(rec.data(), dim, ff.data()), unpack_compressed_record(rec.data(), dim, bb.data());
            const float s = index ? e8m0_to_float(scale) : e4m3_to_float(scale);
            for (int k = 0; k < dim; ++k) {
                const float want = round_to_bf16(e2m1_to_float(static_cast<uint8_t>(k % 16)) * s);
                ASSERT_TRUE(same(ff[k], want)) << (index ? "index" : "compressed") << " element " << k << " scale " << sc;
                ASSERT_TRUE(same(bf16_to_float(bb[k]), want)) << (index ? "index" : "compressed") << " element " << k;
            }
        }
    }
}

}  // namespace
}  // namespace deepinfer
