// fp8 and MXFP4 block-scaled GEMMs (spec §4.3) of every SIMD table against the scalar reference, on
// prepared (packed) and canonical weights, 1-3 threads, tiny to released shapes. Budget: AVX2 is exact
// by construction (column order, exact products); AVX-512 sums each 32-column block in another order,
// so outputs may differ by 1 bf16 ulp, rarely.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/kernels.h"
#include "core/cpu_features.h"
#include "core/env.h"
#include "op_harness.h"

namespace deepinfer::testing {
namespace {

using backend::Fp4Matrix;
using backend::Fp8Acts;
using backend::Fp8Matrix;
using backend::Kernels;
using backend::PackedWeight;

UlpBudget quant_budget(Isa isa) { return isa == Isa::kAvx2 ? UlpBudget{0, 0.0} : UlpBudget{1, 0.002}; }

struct Shape {
    int64_t n, rows, k, pad;
};

std::string describe(const Shape& s) {
    return "n=" + std::to_string(s.n) + " rows=" + std::to_string(s.rows) + " k=" + std::to_string(s.k) + " ldo=rows+" +
           std::to_string(s.pad);
}

// Every table against the reference; `magnitudes` runs the reference on the operands' absolute values (the sums
// of |a w| that bound a sum's error in another order) into out [s.n, s.rows] with row stride s.rows.
template <class Matrix, class Gemm, class Prepare, class Magnitudes>
void check_tables(const Shape& s, const Fp8Acts& a, const Matrix& w, Gemm gemm, Prepare prepare,
                  Magnitudes magnitudes) {
    const int64_t ldo = s.rows + s.pad;
    ThreadPool ref_pool(2);
    Output2d<bf16> ref(s.n, s.rows, ldo);
    gemm(backend::ref::kernels(), a, w, ref.data(), ldo, ref_pool);
    ASSERT_EQ(ref.integrity(), "");
    std::vector<bf16> magnitude(s.n * s.rows);
    magnitudes(magnitude.data(), ref_pool);
    for (const Kernels* table : simd_tables())
        for (bool prepared : {false, true})
            for (int threads : {1, 2, 3}) {
                SCOPED_TRACE(std::string(isa_name(table->isa)) + (prepared ? " prepared" : " canonical") +
                             " threads=" + std::to_string(threads) + " " + describe(s));
                ThreadPool pool(threads);
                PackedWeight packed;
                Matrix wt = w;
                if (prepared) {
                    prepare(*table, w, &packed, pool);
                    ASSERT_NE(packed.layout, backend::PackedLayout::kNone);
                    wt.prepared = &packed;
                    // the packed copy must be self-contained
                    wt.scales = nullptr;
                    if constexpr (std::is_same_v<Matrix, Fp8Matrix>) wt.codes = nullptr;
                    else wt.packed = nullptr;
                }
                Output2d<bf16> out(s.n, s.rows, ldo);
                gemm(*table, a, wt, out.data(), ldo, pool);
                EXPECT_EQ(out.integrity(), "");
                const UlpStats stats = compare_bf16_sums(ref.data(), ldo, out.data(), ldo, s.n, s.rows,
                                                         magnitude.data(), s.rows, kSumOrderRel);
                EXPECT_EQ(check_ulps(stats, quant_budget(table->isa)), "");
                if (threads == 2 && prepared && s.n * s.rows >= 4096)
                    std::printf("  %s %s: %lld of %lld outputs differ (max %lld ulp)\n", isa_name(table->isa).data(),
                                describe(s).c_str(), static_cast<long long>(stats.mismatches),
                                static_cast<long long>(stats.count), static_cast<long long>(stats.worst));
            }
}

// check_tables for gemm_fp8 / gemm_fp4 with their prepare entries.
void check_fp8(const Shape& s, const Fp8Acts& a, const Fp8Matrix& w) {
    check_tables(
        s, a, w,
        [](const Kernels& k, const Fp8Acts& x, const Fp8Matrix& m, bf16* o, int64_t ldo, ThreadPool& p) {
            k.gemm_fp8(x, m, o, ldo, p);
        },
        [](const Kernels& k, const Fp8Matrix& m, PackedWeight* pw, ThreadPool& p) { k.prepare_fp8(m, pw, p); },
        [&](bf16* out, ThreadPool& p) {
            const std::vector<uint8_t> ac = abs_e4m3(a.codes, a.n * a.k), wc = abs_e4m3(w.codes, w.rows * w.cols);
            backend::ref::kernels().gemm_fp8(Fp8Acts{ac.data(), a.scales, a.n, a.k},
                                             Fp8Matrix{wc.data(), w.scales, w.rows, w.cols}, out, s.rows, p);
        });
}
void check_fp4(const Shape& s, const Fp8Acts& a, const Fp4Matrix& w) {
    check_tables(
        s, a, w,
        [](const Kernels& k, const Fp8Acts& x, const Fp4Matrix& m, bf16* o, int64_t ldo, ThreadPool& p) {
            k.gemm_fp4(x, m, o, ldo, p);
        },
        [](const Kernels& k, const Fp4Matrix& m, PackedWeight* pw, ThreadPool& p) { k.prepare_fp4(m, pw, p); },
        [&](bf16* out, ThreadPool& p) {
            const std::vector<uint8_t> ac = abs_e4m3(a.codes, a.n * a.k);
            const std::vector<uint8_t> wp = abs_e2m1_pairs(w.packed, w.rows * w.cols / 2);
            backend::ref::kernels().gemm_fp4(Fp8Acts{ac.data(), a.scales, a.n, a.k},
                                             Fp4Matrix{wp.data(), w.scales, w.rows, w.cols}, out, s.rows, p);
        });
}

void run_fp8(const Shape& s, uint64_t seed) {
    Inputs in(seed);
    QuantizedActs acts(in, s.n, s.k);
    const int64_t scale_rows = (s.rows + 31) / 32, scale_cols = s.k / 32;
    std::vector<uint8_t> codes = in.e4m3_codes(s.rows * s.k), scales = in.bytes(scale_rows * scale_cols, 112, 134);
    Fp8Matrix w{codes.data(), scales.data(), s.rows, s.k};
    check_fp8(s, acts.all(), w);
}

// check_tables for gemm_fp8_bf16x: bf16 activations x [s.n, s.k] as they are.
void check_fp8_bf16x(const Shape& s, const std::vector<bf16>& x, const Fp8Matrix& w) {
    check_tables(
        s, Fp8Acts{nullptr, nullptr, s.n, s.k}, w,
        [&x](const Kernels& k, const Fp8Acts& a, const Fp8Matrix& m, bf16* o, int64_t ldo, ThreadPool& p) {
            k.gemm_fp8_bf16x(x.data(), a.n, m, o, ldo, p);
        },
        [](const Kernels& k, const Fp8Matrix& m, PackedWeight* pw, ThreadPool& p) { k.prepare_fp8(m, pw, p); },
        [&](bf16* out, ThreadPool& p) {
            const std::vector<bf16> ax = abs_bf16(x.data(), x.size());
            const std::vector<uint8_t> wc = abs_e4m3(w.codes, w.rows * w.cols);
            backend::ref::kernels().gemm_fp8_bf16x(ax.data(), s.n, Fp8Matrix{wc.data(), w.scales, w.rows, w.cols}, out,
                                                   s.rows, p);
        });
}

void run_fp8_bf16x(const Shape& s, uint64_t seed) {
    Inputs in(seed);
    std::vector<bf16> x = in.bf16s(s.n * s.k, -3.0f, 3.0f);
    std::vector<uint8_t> codes = in.e4m3_codes(s.rows * s.k), scales = in.bytes(((s.rows + 31) / 32) * (s.k / 32), 112, 134);
    Fp8Matrix w{codes.data(), scales.data(), s.rows, s.k};
    check_fp8_bf16x(s, x, w);
}

void run_fp4(const Shape& s, uint64_t seed) {
    Inputs in(seed);
    QuantizedActs acts(in, s.n, s.k);
    std::vector<uint8_t> packed = in.bytes(s.rows * s.k / 2), scales = in.bytes(s.rows * s.k / 32, 112, 134);
    Fp4Matrix w{packed.data(), scales.data(), s.rows, s.k};
    check_fp4(s, acts.all(), w);
}

// Odd n, rows not a multiple of 16 or 32, k = 32, activation chunks (64 rows) crossed, strided output.
// {1, 650, 64}: 41 row groups, the last of 10 rows; one thread cuts them into units of 6 and a last of 5, so the
// one-row kernels that take two pairs at a time (AVX2 gemv_fp8_bits) also meet a last pair and a lone last group.
const Shape kSmallShapes[] = {{1, 16, 32, 0},   {1, 1, 32, 3},    {2, 33, 64, 1},   {3, 100, 96, 0},
                              {4, 47, 160, 5},  {5, 64, 1280, 0}, {7, 129, 256, 2}, {16, 48, 512, 0},
                              {17, 70, 160, 0}, {64, 32, 256, 1}, {65, 40, 96, 0},  {130, 24, 64, 7},
                              {1, 650, 64, 0}};

TEST(GemmFp8, SmallShapes) {
    uint64_t seed = 100;
    for (const Shape& s : kSmallShapes) run_fp8(s, seed++);
}

// The AVX2 fp8 GEMM's bit-placing decode (1-4 rows; 1-8 at half rate) follows DEEPINFER_YMM_RATE (the ctest variants
// ops.gemm_fp8_ymm_half / _full run these tests under each), else the CPU: the two-halves decode on AMD family 17h
// below model 30h and Hygon 18h. (The plain MXFP4 kernels' panel from 3 rows at half rate: ops.gemm_fp4_ymm_*.)
TEST(GemmFp8, YmmRateFollowsTheSwitch) {
    const std::string forced = env::forced_ymm_rate();
    const bool expect = forced == "half" ? true : forced == "full" ? false : cpu_features().ymm_half_rate;
    EXPECT_EQ(ymm_half_rate(), expect) << "DEEPINFER_YMM_RATE=" << forced;
}

// The AVX2 table's integer MXFP4 kernels take the form DEEPINFER_AVX_VNNI asks for where the CPU has it (the ctest
// variants ops.gemm_fp4_avx_vnni_off / _evex_vnni run these tests under each), else the best it has: VEX-encoded
// VNNI, then EVEX-encoded, then none.
TEST(GemmFp4, VnniFormFollowsTheSwitch) {
    const CpuFeatures& f = cpu_features();
    const bool evex = f.evex_vnni_native;
    const std::string forced = env::forced_avx_vnni();
    VnniEncoding expect = f.avx_vnni ? VnniEncoding::kVex : evex ? VnniEncoding::kEvex : VnniEncoding::kNone;
    if (forced == "off") expect = VnniEncoding::kNone;
    if (forced == "evex" && evex) expect = VnniEncoding::kEvex;
    EXPECT_EQ(avx2_vnni_encoding(), expect) << "DEEPINFER_AVX_VNNI=" << forced;
    EXPECT_EQ(avx_vnni_enabled(), expect != VnniEncoding::kNone);
    const std::string name = kernel_set_name(Isa::kAvx2);
    EXPECT_EQ(name, expect == VnniEncoding::kVex    ? "avx2+vnni"
                    : expect == VnniEncoding::kEvex ? "avx2+vnni(evex)"
                                                    : "avx2");
}

TEST(GemmFp4, SmallShapes) {
    uint64_t seed = 200;
    for (const Shape& s : kSmallShapes) run_fp4(s, seed++);
}

// The AMX kernel's work items of many rows (up to kTileItemRows): runs of pairs of row groups with a lone last group,
// k in several chunks with a short last one, items of 4+ passes over two row tiles (each chunk decoded during the
// step before) and of fewer. (RowInvariance.GemmFp8TileItems checks those rows bit for bit against smaller batches.
// With some seeds n = 300, k = 1280 put a few outputs 2-3 ulps off the reference where their sums cancel: within
// compare_bf16_sums' budget, not within plain ulps.)
TEST(GemmFp8, TileItems) {
    uint64_t seed = 180;
    for (const Shape& s : {Shape{130, 100, 608, 0}, Shape{97, 33, 320, 1}, Shape{300, 100, 1280, 0}}) {
        run_fp8(s, seed);
        run_fp8_bf16x(s, seed++);
    }
}

TEST(GemmFp8Bf16x, SmallShapes) {
    uint64_t seed = 150;
    for (const Shape& s : kSmallShapes) run_fp8_bf16x(s, seed++);
}

// bf16 activations far outside e4m3's range (up to 2^100 and down to 2^-100, zeros), and ordinary rows with one
// value just past the upper end of the range the AVX2 bit-placing decode takes: a decode that scales the
// activations must take only rows within its range.
TEST(GemmFp8Bf16x, WideActivations) {
    for (int64_t n = 1; n <= 5; ++n) {
        Inputs in(170 + n);
        const Shape s{n, 48, 256, 0};
        std::vector<bf16> x(s.n * s.k);
        for (auto& v : x) {
            const float mag = std::ldexp(in.uniform(1.0f, 2.0f), in.uniform_int(-100, 100));
            v = float_to_bf16(in.uniform_int(0, 9) == 0 ? 0.0f : (in.uniform_int(0, 1) ? mag : -mag));
        }
        std::vector<uint8_t> codes = in.e4m3_codes(s.rows * s.k);
        std::vector<uint8_t> scales = in.bytes((s.rows / 32 + 1) * (s.k / 32), 112, 134);
        check_fp8_bf16x(s, x, Fp8Matrix{codes.data(), scales.data(), s.rows, s.k});
        // ordinary rows but for one value at the edge of the AVX2 bit-placing decode's range (2^9 is outside:
        // scaled by 2^119 it would overflow)
        std::vector<bf16> edge = in.bf16s(s.n * s.k, -3.0f, 3.0f);
        edge[(s.n - 1) * s.k + 17] = float_to_bf16(0x1p9f);
        check_fp8_bf16x(s, edge, Fp8Matrix{codes.data(), scales.data(), s.rows, s.k});
    }
}

// One wo_a group (1024 x 4096, spec §5.3.7) at decode batch sizes.
TEST(GemmFp8Bf16x, ReleasedShapes) {
    run_fp8_bf16x({1, 1024, 4096, 0}, 10);
    run_fp8_bf16x({5, 1024, 4096, 0}, 11);
}

// The spec's wo_a is a bf16 GEMM on the weight dequantized to bf16 (spec §3.4 step 4). gemm_fp8_bf16x
// computes the same exact products from the fp8 codes and only sums them in another order (per 32-column
// block, then the blocks): the reference kernels of the two agree to a bf16 rounding at most, on few outputs.
TEST(GemmFp8Bf16x, IsTheBf16GemmOnTheDequantizedWeight) {
    Inputs in(12);
    const Shape s{4, 256, 4096, 0};
    std::vector<bf16> x = in.bf16s(s.n * s.k, -3.0f, 3.0f);
    std::vector<uint8_t> codes = in.e4m3_codes(s.rows * s.k), scales = in.bytes((s.rows / 32) * (s.k / 32), 112, 134);
    std::vector<bf16> dequantized(s.rows * s.k);
    for (int64_t j = 0; j < s.rows; ++j)
        for (int64_t c = 0; c < s.k; ++c)
            dequantized[j * s.k + c] = float_to_bf16(e4m3_to_float(codes[j * s.k + c]) *
                                                     e8m0_to_float(scales[(j / 32) * (s.k / 32) + c / 32]));
    ThreadPool pool(2);
    const Kernels& ref = backend::ref::kernels();
    std::vector<bf16> from_fp8(s.n * s.rows), from_bf16(s.n * s.rows);
    ref.gemm_fp8_bf16x(x.data(), s.n, Fp8Matrix{codes.data(), scales.data(), s.rows, s.k}, from_fp8.data(), s.rows, pool);
    ref.gemm_bf16(x.data(), s.n, backend::Bf16Matrix{dequantized.data(), s.rows, s.k}, from_bf16.data(), s.rows, pool);
    const UlpStats stats = compare_bf16(from_bf16.data(), s.rows, from_fp8.data(), s.rows, s.n, s.rows);
    std::printf("  fp8 codes vs dequantized bf16 weight: %lld of %lld outputs differ (max %lld ulp)\n",
                static_cast<long long>(stats.mismatches), static_cast<long long>(stats.count),
                static_cast<long long>(stats.worst));
    EXPECT_EQ(check_ulps(stats, UlpBudget{1, 0.05}), "");
}

// wq_b, wo_b, wq_a / shared expert w1 (spec §3.3) at decode batch sizes.
TEST(GemmFp8, ReleasedShapes) {
    run_fp8({1, 32768, 1280, 0}, 1);
    run_fp8({2, 5120, 8192, 0}, 2);
    run_fp8({3, 2304, 5120, 0}, 3);
}

// Routed expert w1/w3 (2304 x 5120) and w2 (5120 x 2304).
TEST(GemmFp4, ReleasedShapes) {
    run_fp4({1, 2304, 5120, 0}, 4);
    run_fp4({2, 5120, 2304, 0}, 5);
}

// NaN codes in weights or activations give NaN outputs exactly where the reference has them; prepared weights
// with a NaN code are not flagged plain_codes (the kernels' NaN patching stays on), weights without are.
TEST(GemmFp8, NanPropagates) {
    Inputs in(7);
    const Shape s{3, 40, 64, 0};
    QuantizedActs acts(in, s.n, s.k);
    acts.codes[1 * s.k + 5] = 0x7f;  // activation row 1
    std::vector<uint8_t> codes = in.e4m3_codes(s.rows * s.k), scales = in.bytes(2 * 2, 120, 130);
    ThreadPool pool(2);
    for (const Kernels* table : simd_tables()) {
        PackedWeight pw;
        table->prepare_fp8(Fp8Matrix{codes.data(), scales.data(), s.rows, s.k}, &pw, pool);
        EXPECT_TRUE(pw.plain_codes) << isa_name(table->isa);
    }
    codes[17 * s.k + 40] = 0xff;  // weight row 17
    Fp8Matrix w{codes.data(), scales.data(), s.rows, s.k};
    for (const Kernels* table : simd_tables()) {
        PackedWeight pw;
        table->prepare_fp8(w, &pw, pool);
        EXPECT_FALSE(pw.plain_codes) << isa_name(table->isa);
    }
    check_fp8(s, acts.all(), w);
}

// Operands at the edges of the AMX fp8 kernel's window and past them (widen_fp8_scales), against the reference:
// kept and sent rows and weight pairs side by side, a NaN weight scale; 3 and 14 rows (one row tile: the scales on
// the activations, on the weights), 40 (two tile pairs), 100 and 300 (work items of up to kTileItemRows rows on AMX,
// their rows and pairs outside the window handed to the vdpbf16ps kernel in slices of kActRowChunk), every table.
TEST(GemmFp8, OperandWindow) {
    for (int64_t n : {3, 14, 40, 100, 300}) {
        Inputs in(30 + n);
        const Shape s{n, 100, 256, 0};
        QuantizedActs acts(in, s.n, s.k);
        std::vector<uint8_t> codes = in.e4m3_codes(s.rows * s.k), scales = in.bytes(4 * (s.k / 32), 112, 134);
        widen_fp8_scales(acts, scales, 4);
        check_fp8(s, acts.all(), Fp8Matrix{codes.data(), scales.data(), s.rows, s.k});
    }
}

// The AVX-512 table decodes the fp8 blocks without subnormal codes by placing the codes' bits (1-4 rows,
// gemm_quant_avx512.cpp) and the rest by table lookup; a canonical weight, packed per call, has no block
// flags and takes the lookup everywhere. The two must give the same bits. Weights of normal
// codes (the largest included), zeros of both signs and a subnormal code planted in about a third of the
// 16x32 blocks; e4m3 activations, bf16 rows within the range the bit placing takes (2^-54 <= |a| < 2^64) and
// rows with one value outside it; bf16 and fp32 outputs; 1-8 rows (5-8 run the lookup alone), 1-3 threads;
// and the reference within the budget.
TEST(GemmFp8, BitPlacingDecodeIsTheLookup) {
    Inputs in(21);
    const Shape shapes[] = {{1, 100, 1280, 0}, {2, 64, 256, 0}, {3, 16, 32, 0},
                            {4, 47, 160, 0},   {5, 33, 96, 0},  {8, 40, 64, 0}};
    for (const Shape& s : shapes) {
        SCOPED_TRACE(describe(s));
        std::vector<uint8_t> codes = in.e4m3_normal_codes(s.rows * s.k);
        std::vector<uint8_t> scales = in.bytes(((s.rows + 31) / 32) * (s.k / 32), 100, 150);
        int planted = 0;
        for (int64_t g = 0; g < (s.rows + 15) / 16; ++g)
            for (int64_t kb = 0; kb < s.k / 32; ++kb) {
                if (in.uniform_int(0, 2) != 0) continue;
                const int64_t row = std::min<int64_t>(s.rows - 1, 16 * g + in.uniform_int(0, 15));
                codes[row * s.k + 32 * kb + in.uniform_int(0, 31)] =
                    static_cast<uint8_t>(in.uniform_int(1, 7) | in.uniform_int(0, 1) << 7);
                ++planted;
            }
        const Fp8Matrix w{codes.data(), scales.data(), s.rows, s.k};
        QuantizedActs acts(in, s.n, s.k);
        std::vector<bf16> x_in = in.bf16s(s.n * s.k, -3.0f, 3.0f);
        x_in[0] = float_to_bf16(0x1p-54f);
        x_in[s.n * s.k - 1] = float_to_bf16(-0x1.fep63f);
        x_in[s.k / 2] = float_to_bf16(-0.0f);
        std::vector<bf16> x_big = x_in, x_tiny = x_in;
        x_big[s.n * s.k / 3] = float_to_bf16(0x1p64f);
        x_tiny[s.n * s.k / 3] = float_to_bf16(0x1p-55f);
        const int64_t count = s.n * s.rows;
        for (const Kernels* table : simd_tables())
            for (int threads : {1, 2, 3}) {
                SCOPED_TRACE(std::string(isa_name(table->isa)) + " threads=" + std::to_string(threads) +
                             " planted=" + std::to_string(planted));
                ThreadPool pool(threads);
                PackedWeight pw;
                table->prepare_fp8(w, &pw, pool);
                Fp8Matrix prepared = w;
                prepared.prepared = &pw;
                auto same_bf16 = [&](auto&& gemm) {
                    std::vector<bf16> lookup(count), placed(count);
                    gemm(w, lookup.data());
                    gemm(prepared, placed.data());
                    return std::memcmp(lookup.data(), placed.data(), count * sizeof(bf16)) == 0;
                };
                EXPECT_TRUE(same_bf16(
                    [&](const Fp8Matrix& m, bf16* o) { table->gemm_fp8(acts.all(), m, o, s.rows, pool); }));
                for (const std::vector<bf16>* x : {&x_in, &x_big, &x_tiny})
                    EXPECT_TRUE(same_bf16([&](const Fp8Matrix& m, bf16* o) {
                        table->gemm_fp8_bf16x(x->data(), s.n, m, o, s.rows, pool);
                    })) << "bf16 rows " << (x == &x_in ? "in range" : x == &x_big ? "with 2^64" : "with 2^-55");
                std::vector<float> lookup(count), placed(count);
                table->gemm_fp8_f32(acts.all(), w, lookup.data(), s.rows, pool);
                table->gemm_fp8_f32(acts.all(), prepared, placed.data(), s.rows, pool);
                EXPECT_EQ(std::memcmp(lookup.data(), placed.data(), count * sizeof(float)), 0) << "fp32 outputs";
            }
        check_fp8(s, acts.all(), w);
    }
}

// MXFP4 scale codes 0 (2^-127) and 255 (NaN) give the reference's results; prepared weights carry them on
// the kernels' exact scale path (plain_scales false), weights without them on the shift-only one.
TEST(GemmFp4, ExtremeScaleCodes) {
    Inputs in(8);
    const Shape s{3, 40, 64, 0};
    QuantizedActs acts(in, s.n, s.k);
    std::vector<uint8_t> packed = in.bytes(s.rows * s.k / 2), scales = in.bytes(s.rows * s.k / 32, 120, 130);
    const Fp4Matrix plain{packed.data(), scales.data(), s.rows, s.k};
    ThreadPool pool(1);
    for (const Kernels* table : simd_tables()) {
        PackedWeight pw;
        table->prepare_fp4(plain, &pw, pool);
        EXPECT_TRUE(pw.plain_scales) << isa_name(table->isa);
    }
    scales[9 * 2 + 1] = 255;  // row 9, block 1: NaN
    scales[20 * 2 + 0] = 0;   // row 20, block 0: 2^-127
    scales[33 * 2 + 1] = 0;   // row 33 (the lone last group), block 1
    Fp4Matrix w{packed.data(), scales.data(), s.rows, s.k};
    for (const Kernels* table : simd_tables()) {
        PackedWeight pw;
        table->prepare_fp4(w, &pw, pool);
        EXPECT_FALSE(pw.plain_scales) << isa_name(table->isa);
    }
    check_fp4(s, acts.all(), w);
}

// A wide block whose fp32 chain rounds: eight products 6 x 448, then 0.5 x 2^-9 (the smallest subnormal), a tie
// at that magnitude that rounds to even (away), then the eight products back out: the reference's block partial
// is 0 where the exact sum is 2^-10. The AVX2 integer kernels must see that a partial sum could round there
// (fp4_row_avx2.cpp) and run the chain: 1 row (GEMV), 2-4 (fp32 stream) and 5-64 (panel GEMM; on AVX-512 with
// AMX 5-16 rows in one tile, 40 in a pass of two tiles and one of one). Rows with a second block of random values
// check the rest of the path.
TEST(GemmFp4, WideBlockWhoseChainRounds) {
    Inputs in(12);
    const int64_t k = 64, rows = 20;
    std::vector<uint8_t> packed(rows * k / 2), wscales(rows * k / 32, 127);
    auto set_w = [&](int64_t r, int64_t col, uint8_t code) {
        uint8_t& b = packed[r * k / 2 + col / 2];
        b = col % 2 ? static_cast<uint8_t>((b & 0x0f) | code << 4) : static_cast<uint8_t>((b & 0xf0) | code);
    };
    const std::vector<uint8_t> random_w = in.bytes(rows * k);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < k; ++col)
            set_w(r, col, col <= 16 ? (col == 8 ? 0x1 : 0x7) : random_w[r * k + col] & 0xf);  // 0.5, 6
    const Fp4Matrix w{packed.data(), wscales.data(), rows, k};
    for (int64_t n : {1, 3, 8, 16, 40}) {
        std::vector<uint8_t> codes(n * k, 0), ascales(n * 2, 127);
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t col = 0; col <= 16; ++col) codes[i * k + col] = col < 8 ? 0x7e : col == 8 ? 0x01 : 0xfe;
            if (i % 2) {
                const std::vector<uint8_t> second = in.e4m3_codes(32);
                std::copy(second.begin(), second.end(), codes.begin() + i * k + 32);
            }
        }
        const Fp8Acts a{codes.data(), ascales.data(), n, k};
        ThreadPool pool(1);
        std::vector<bf16> ref(n * rows);
        backend::ref::kernels().gemm_fp4(a, w, ref.data(), rows, pool);
        EXPECT_EQ(bf16_to_float(ref[0]), 0.0f) << "the reference's chain is expected to round the tie away";
        check_fp4(Shape{n, rows, k, 0}, a, w);
    }
}

// Block scales and activation scales at the edges of fp32's range, where a product of scales leaves the normal
// range: AVX2's panel GEMM takes the scales' product by adding exponents only where every product of the
// reference's scaling stays normal (ExponentRange in gemm_fp4_int_avx2.cpp). Group 0 (scale code 26: 2^-126
// with the values' 2^-25) meets 2^-67 in blocks 0 and 2 (the reference's product: 0); half of group 1 has code
// 20 (a subnormal factor) in every block, so that block 1 (2^-132 * 2^73) makes its outputs. Half of a third
// group has code 254, whose product with block 1's 2^73 is infinite (blocks 0 and 2 finite): there the SIMD
// tables scale a block's sum by the product of its scales where the reference multiplies by one scale and then
// the other (0 * inf: NaN, not 0), so those outputs are only checked to be non-finite where the reference's are
// (and the same elsewhere).
TEST(GemmFp4, ScaleProductsLeavingTheNormalRange) {
    Inputs in(14);
    const int64_t k = 96, rows = 48;
    const std::vector<uint8_t> packed = in.bytes(rows * k / 2);
    std::vector<uint8_t> wscales(rows * k / 32);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t kb = 0; kb < 3; ++kb)
            wscales[r * 3 + kb] = r < 16 ? 26 : r < 24 ? 20 : r < 32 ? 127 : r < 40 ? 254 : 127;
    const Fp4Matrix finite{packed.data(), wscales.data(), 32, k};
    const Fp4Matrix overflowing{packed.data() + 32 * k / 2, wscales.data() + 32 * 3, 16, k};
    for (int64_t n : {5, 16}) {
        const std::vector<uint8_t> codes = in.e4m3_codes(n * k);
        std::vector<uint8_t> ascales(n * 3);
        for (int64_t i = 0; i < n; ++i) {
            ascales[i * 3 + 0] = 60;  // 2^-67
            ascales[i * 3 + 1] = 200;  // 2^73
            ascales[i * 3 + 2] = 60;
        }
        const Fp8Acts a{codes.data(), ascales.data(), n, k};
        check_fp4(Shape{n, 32, k, 0}, a, finite);
        ThreadPool pool(1);
        std::vector<bf16> ref(n * 16), out(n * 16);
        backend::ref::kernels().gemm_fp4(a, overflowing, ref.data(), 16, pool);
        for (const Kernels* table : simd_tables())
            for (bool prepared : {false, true}) {
                SCOPED_TRACE(std::string(isa_name(table->isa)) + (prepared ? " prepared" : " canonical"));
                PackedWeight pw;
                Fp4Matrix wt = overflowing;
                if (prepared) table->prepare_fp4(overflowing, &pw, pool), wt.prepared = &pw;
                table->gemm_fp4(a, wt, out.data(), 16, pool);
                int64_t infinite = 0, finite = 0;
                for (int64_t e = 0; e < n * 16; ++e) {
                    const float r = bf16_to_float(ref[e]), o = bf16_to_float(out[e]);
                    infinite += !std::isfinite(r);
                    finite += std::isfinite(r);
                    if (std::isfinite(r)) EXPECT_EQ(r, o) << "output " << e;
                    else EXPECT_FALSE(std::isfinite(o)) << "output " << e << ": " << o;
                }
                // both branches above must have outputs to check: the code 254 rows overflow, the code 127 ones not
                EXPECT_GE(infinite, n * 8) << "the code 254 rows' outputs are expected to overflow";
                EXPECT_GE(finite, n * 8) << "the code 127 rows' outputs are expected to stay finite";
            }
    }
}

// A block whose integer sum lies between 2^23 and 2^24 (no fp32 partial sum rounds: the integer kernels take it)
// with every v an int16: AVX2's panel GEMM meets the weights times 256 there, and must shift such a block's words
// (Fp4PanelRow::shift) or its int32 sums would pass 2^31. Rows of 5-40: every tile size of that kernel.
TEST(GemmFp4, BlockSumBetween2To23And2To24) {
    Inputs in(13);
    const int64_t k = 64, rows = 20;
    std::vector<uint8_t> packed = in.bytes(rows * k / 2), wscales(rows * k / 32, 127);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < 32; col += 2) packed[r * k / 2 + col / 2] = r % 2 ? 0x77 : 0xff;  // 6 or -6
    const Fp4Matrix w{packed.data(), wscales.data(), rows, k};
    for (int64_t n : {5, 6, 7, 16, 40}) {
        std::vector<uint8_t> codes = in.e4m3_codes(n * k), ascales(n * 2, 127);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t col = 0; col < 32; ++col)  // v = 8 (2^-8) once, 15 * 2^11 (480) 31 times: 952328
                codes[i * k + col] = col == 7 ? 0x10 : i % 3 ? 0x6f : 0xef;
        const Fp8Acts a{codes.data(), ascales.data(), n, k};
        check_fp4(Shape{n, rows, k, 0}, a, w);
    }
}

// Blocks at the bound of the AVX2 integer kernels' int16 sums (fp4_planes.h chunk_pair_sums): every weight 6
// (biased 24) against v = -32768 (a high plane byte of -128) in 31 of 32 columns, so that each vpmaddubsw lane is
// -6144 and two chunks' sums of a lane -24576, the most negative that fits; summed over all four chunks before
// widening, they would wrap. Block 0 fits two planes; block 2 needs the third (planes_block<G, 3>) for one column of
// 14 * 2^13 (a top plane byte of 2, a high one of -64) beside 30 of v = -32768. 1-4 rows: the GEMV and the GEMM of a
// few rows; a row of weights -6 (biased 0), random rows and a random block 1 beside them.
TEST(GemmFp4, PlaneSumsAtTheirBound) {
    Inputs in(15);
    const int64_t k = 96, rows = 40;
    std::vector<uint8_t> packed = in.bytes(rows * k / 2), wscales(rows * k / 32, 127);
    for (int64_t r = 0; r < 32; ++r)
        for (int64_t col : {0, 64})
            for (int64_t c = col; c < col + 32; c += 2) packed[r * k / 2 + c / 2] = r == 5 ? 0xff : 0x77;  // -6 or 6
    const Fp4Matrix w{packed.data(), wscales.data(), rows, k};
    for (int64_t n : {1, 2, 3, 4}) {
        std::vector<uint8_t> codes = in.e4m3_codes(n * k), ascales(n * 3, 127);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t col = 0; col < 32; ++col) {
                codes[i * k + col] = col == 3 ? 0x10 : 0xf0;  // v = 8 (2^-5) once, -8 * 2^12 (-128) 31 times
                // v = 8 (2^-5) once, 14 * 2^13 (448) once, -8 * 2^12 (-128) 30 times
                codes[i * k + 64 + col] = col == 3 ? 0x10 : col == 17 ? 0x7e : 0xf0;
            }
        const Fp8Acts a{codes.data(), ascales.data(), n, k};
        check_fp4(Shape{n, rows, k, 0}, a, w);
    }
}

// gemm_fp4_grouped gives, for every GEMM of the group, exactly what gemm_fp4 gives on its own (every table,
// prepared and canonical weights, 1-3 threads): GEMMs of different shapes and row counts, one crossing the
// 64-row activation chunks, one sharing another's activations (as w1 and w3 do), one with no rows.
TEST(GemmFp4Grouped, EachGemmAsAlone) {
    Inputs in(9);
    const Shape shapes[] = {{1, 48, 160, 0}, {1, 33, 160, 2}, {3, 100, 64, 0}, {70, 40, 96, 1}, {0, 16, 64, 0}};
    std::vector<QuantizedActs> acts;
    std::vector<std::vector<uint8_t>> packed, scales;
    for (const Shape& s : shapes) {
        acts.emplace_back(in, s.n, s.k);
        packed.push_back(in.bytes(s.rows * s.k / 2));
        scales.push_back(in.bytes(s.rows * s.k / 32, 112, 134));
    }
    std::vector<const Kernels*> tables = simd_tables();
    tables.push_back(&backend::ref::kernels());
    for (const Kernels* table : tables)
        for (bool prepared : {false, true})
            for (int threads : {1, 2, 3}) {
                SCOPED_TRACE(std::string(isa_name(table->isa)) + (prepared ? " prepared" : " canonical") +
                             " threads=" + std::to_string(threads));
                ThreadPool pool(threads);
                std::vector<PackedWeight> pw(std::size(shapes));
                std::vector<backend::Fp4Gemm> gemms;
                std::vector<std::vector<bf16>> alone(std::size(shapes)), grouped(std::size(shapes));
                for (size_t i = 0; i < std::size(shapes); ++i) {
                    const Shape& s = shapes[i];
                    Fp4Matrix w{packed[i].data(), scales[i].data(), s.rows, s.k};
                    if (prepared) table->prepare_fp4(w, &pw[i], pool), w.prepared = &pw[i];
                    const int64_t ldo = s.rows + s.pad;
                    // the second GEMM reads the first one's activations (w1 / w3)
                    const Fp8Acts a = i == 1 ? acts[0].all() : acts[i].all();
                    alone[i].assign(static_cast<size_t>(std::max<int64_t>(1, a.n * ldo)), bf16{0x7fc1});
                    grouped[i] = alone[i];
                    table->gemm_fp4(a, w, alone[i].data(), ldo, pool);
                    gemms.push_back({a, w, grouped[i].data(), ldo});
                }
                table->gemm_fp4_grouped(gemms.data(), static_cast<int64_t>(gemms.size()), pool);
                for (size_t i = 0; i < std::size(shapes); ++i)
                    EXPECT_EQ(0, std::memcmp(alone[i].data(), grouped[i].data(), alone[i].size() * sizeof(bf16)))
                        << "GEMM " << i;
            }
}

// gemm_fp8_bf16x_grouped gives every GEMM exactly what gemm_fp8_bf16x gives it alone (every table, prepared
// and canonical, 1-3 threads), reading x as column slices of one wide activation and writing column slices of
// one wide output, as wo_a's groups do; a GEMM with no rows and one crossing the 64-row chunks included.
TEST(GemmFp8Bf16xGrouped, EachGemmAsAlone) {
    Inputs in(13);
    struct G {
        int64_t n, rows, k;
    };
    const G shapes[] = {{3, 48, 160}, {3, 33, 160}, {3, 64, 96}, {0, 16, 64}};
    const int64_t ldx = 160 + 160 + 96 + 64 + 32, ldo = 48 + 33 + 64 + 16 + 5;  // slices side by side, slack
    std::vector<bf16> wide = in.bf16s(70 * ldx, -3.0f, 3.0f);
    std::vector<std::vector<uint8_t>> codes, scales;
    for (const G& s : shapes) {
        codes.push_back(in.e4m3_codes(s.rows * s.k));
        scales.push_back(in.bytes(((s.rows + 31) / 32) * (s.k / 32), 112, 134));
    }
    std::vector<const Kernels*> tables = simd_tables();
    tables.push_back(&backend::ref::kernels());
    for (int64_t n : {int64_t{3}, int64_t{70}})
        for (const Kernels* table : tables)
            for (bool prepared : {false, true})
                for (int threads : {1, 2, 3}) {
                    SCOPED_TRACE(std::string(isa_name(table->isa)) + (prepared ? " prepared" : " canonical") +
                                 " threads=" + std::to_string(threads) + " n=" + std::to_string(n));
                    ThreadPool pool(threads);
                    std::vector<PackedWeight> pw(std::size(shapes));
                    std::vector<backend::Fp8Bf16xGemm> gemms;
                    std::vector<bf16> alone(n * ldo, bf16{0x7fc1}), grouped = alone;
                    int64_t x0 = 0, o0 = 0;
                    for (size_t i = 0; i < std::size(shapes); ++i) {
                        const G& s = shapes[i];
                        const int64_t rows_n = s.n == 0 ? 0 : n;
                        Fp8Matrix w{codes[i].data(), scales[i].data(), s.rows, s.k};
                        if (prepared) table->prepare_fp8(w, &pw[i], pool), w.prepared = &pw[i];
                        std::vector<bf16> x(rows_n * s.k), out(rows_n * s.rows);
                        for (int64_t r = 0; r < rows_n; ++r)
                            std::copy(wide.begin() + r * ldx + x0, wide.begin() + r * ldx + x0 + s.k, x.begin() + r * s.k);
                        table->gemm_fp8_bf16x(x.data(), rows_n, w, out.data(), s.rows, pool);
                        for (int64_t r = 0; r < rows_n; ++r)
                            std::copy(out.begin() + r * s.rows, out.begin() + (r + 1) * s.rows, alone.begin() + r * ldo + o0);
                        gemms.push_back({wide.data() + x0, rows_n, ldx, w, grouped.data() + o0, ldo});
                        x0 += s.k;
                        o0 += s.rows;
                    }
                    table->gemm_fp8_bf16x_grouped(gemms.data(), static_cast<int64_t>(gemms.size()), pool);
                    EXPECT_EQ(0, std::memcmp(alone.data(), grouped.data(), alone.size() * sizeof(bf16)));
                }
}

}  // namespace
}  // namespace deepinfer::testing

namespace deepinfer::testing {
namespace {

// gemm_fp8_f32 (row-parallel partial sums under TP) is gemm_fp8 before its final rounding: in every table,
// rounding its fp32 output to bf16 gives exactly the table's bf16 output, and it matches the reference's
// fp32 output up to the in-block summation order: within 1e-5 relative, or, where the sum cancels, within
// 2^-20 of the sum of the scaled products' magnitudes (a block summed in another order -- AMX's tdpbf16ps --
// is off the exact sum by a few units of 2^-24 of its magnitudes, as the sequential sum is).
TEST(GemmFp8F32, IsTheBf16GemmBeforeRounding) {
    uint64_t seed = 300;
    for (const Shape& s : {Shape{1, 100, 160, 0}, Shape{3, 129, 256, 0}, Shape{17, 64, 1280, 0}, Shape{70, 48, 96, 0}}) {
        Inputs in(seed++);
        QuantizedActs acts(in, s.n, s.k);
        std::vector<uint8_t> codes = in.e4m3_codes(s.rows * s.k), scales = in.bytes(((s.rows + 31) / 32) * (s.k / 32), 112, 134);
        Fp8Matrix w{codes.data(), scales.data(), s.rows, s.k};
        ThreadPool pool(2);
        std::vector<float> ref(s.n * s.rows), magnitude(s.n * s.rows, 0.0f);
        backend::ref::kernels().gemm_fp8_f32(acts.all(), w, ref.data(), s.rows, pool);
        auto act = [&](int64_t i, int64_t c) {
            return e4m3_to_float(acts.codes[i * s.k + c]) * e8m0_to_float(acts.scales[i * (s.k / 32) + c / 32]);
        };
        auto weight = [&](int64_t j, int64_t c) {
            return e4m3_to_float(codes[j * s.k + c]) * e8m0_to_float(scales[(j / 32) * (s.k / 32) + c / 32]);
        };
        for (int64_t i = 0; i < s.n; ++i)
            for (int64_t j = 0; j < s.rows; ++j)
                for (int64_t c = 0; c < s.k; ++c) magnitude[i * s.rows + j] += std::fabs(act(i, c) * weight(j, c));
        std::vector<const Kernels*> tables = simd_tables();
        tables.push_back(&backend::ref::kernels());
        for (const Kernels* table : tables)
            for (bool prepared : {false, true}) {
                SCOPED_TRACE(std::string(isa_name(table->isa)) + (prepared ? " prepared " : " canonical ") + describe(s));
                PackedWeight packed;
                Fp8Matrix wt = w;
                if (prepared) {
                    table->prepare_fp8(w, &packed, pool);
                    wt.prepared = &packed;
                }
                std::vector<float> f32(s.n * s.rows, -1.0f);
                std::vector<bf16> b16(s.n * s.rows);
                table->gemm_fp8_f32(acts.all(), wt, f32.data(), s.rows, pool);
                table->gemm_fp8(acts.all(), wt, b16.data(), s.rows, pool);
                for (int64_t i = 0; i < s.n * s.rows; ++i) {
                    ASSERT_EQ(float_to_bf16(f32[i]).bits, b16[i].bits) << "output " << i;
                    ASSERT_NEAR(f32[i], ref[i], std::max(1e-5f * (std::fabs(ref[i]) + 1.0f), 0x1p-20f * magnitude[i]))
                        << "output " << i;
                }
            }
    }
}

}  // namespace
}  // namespace deepinfer::testing
