// bf16 / fp32 linears of every SIMD table against the scalar reference: decode (few rows) and prefill
// (many rows, weight-stationary / panel kernels) paths, k with and without tails, 1-3 threads.
// Budgets: bf16 outputs within 1 ulp, rarely different (summation order); fp32 x bf16 outputs within the
// rigorous bound for two summation orders, 2 (k + 1) 2^-24 sum |x w|, or on a prepared weight (AMX tiles: each x
// split into three bf16 parts, 3 k terms a sum) 4 (k + 1) 2^-24 sum |x w|; fp32 x fp32 (gemm_f32) bit-identical.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/kernels.h"
#include "op_harness.h"

namespace deepinfer::testing {
namespace {

using backend::Bf16Matrix;
using backend::F32Matrix;
using backend::Kernels;

struct Shape {
    int64_t n, rows, k, pad;
};

std::string describe(const Shape& s) {
    return "n=" + std::to_string(s.n) + " rows=" + std::to_string(s.rows) + " k=" + std::to_string(s.k) + " ldo=rows+" +
           std::to_string(s.pad);
}

// n below / at / above the stationary threshold (8), k = 1, odd, not a multiple of 16 or 32, chunks of 64 rows;
// k past the AVX-512 blocked path's 512-column chunks with a tail, n past its 128-row groups.
const Shape kShapes[] = {{1, 1, 1, 0},    {1, 5, 31, 2},    {2, 17, 40, 0},  {3, 33, 100, 1},   {4, 16, 32, 0},
                         {7, 50, 64, 0},  {8, 16, 32, 3},   {9, 33, 96, 0},  {16, 100, 512, 0}, {64, 40, 128, 1},
                         {65, 20, 64, 0}, {70, 31, 100, 0}, {130, 17, 48, 0}, {135, 21, 1100, 1}};

// Prepared (`prepared`): each table's Kernels::prepare_bf16 layout, where it makes one (AMX tiles).
void run_bf16(const Shape& s, uint64_t seed, bool prepared = false) {
    Inputs in(seed);
    std::vector<bf16> x = in.bf16s(s.n * s.k), w = in.bf16s(s.rows * s.k);
    const Bf16Matrix m{w.data(), s.rows, s.k};
    const int64_t ldo = s.rows + s.pad;
    ThreadPool ref_pool(2);
    Output2d<bf16> ref(s.n, s.rows, ldo);
    backend::ref::kernels().gemm_bf16(x.data(), s.n, m, ref.data(), ldo, ref_pool);
    // sum |x w| per output: where a sum cancels, another summation order may be off by more than an ulp
    // (compare_bf16_sums)
    const std::vector<bf16> ax = abs_bf16(x.data(), x.size()), aw = abs_bf16(w.data(), w.size());
    std::vector<bf16> magnitude(s.n * s.rows);
    backend::ref::kernels().gemm_bf16(ax.data(), s.n, Bf16Matrix{aw.data(), s.rows, s.k}, magnitude.data(), s.rows,
                                      ref_pool);
    for (const Kernels* table : simd_tables())
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(std::string(isa_name(table->isa)) + " threads=" + std::to_string(threads) + " " + describe(s));
            ThreadPool pool(threads);
            Output2d<bf16> out(s.n, s.rows, ldo);
            Bf16Matrix mt = m;
            backend::PackedWeight pw;
            if (prepared && table->prepare_bf16) table->prepare_bf16(m, &pw, pool);
            if (pw.layout != backend::PackedLayout::kNone) mt.prepared = &pw;
            table->gemm_bf16(x.data(), s.n, mt, out.data(), ldo, pool);
            EXPECT_EQ(out.integrity(), "");
            EXPECT_EQ(check_ulps(compare_bf16_sums(ref.data(), ldo, out.data(), ldo, s.n, s.rows, magnitude.data(),
                                                   s.rows, kSumOrderRel),
                                 UlpBudget{1, 0.002}),
                      "");
        }
}

// fp32 x against bf16 (kBf16W) or fp32 weights; bf16 ones prepared by each table (Kernels::prepare_bf16)
// when `prepared`.
template <bool kBf16W>
void run_f32(const Shape& s, uint64_t seed, bool prepared = false) {
    Inputs in(seed);
    std::vector<float> x = in.floats(s.n * s.k);
    std::vector<bf16> wb = in.bf16s(s.rows * s.k);
    std::vector<float> wf(s.rows * s.k);
    for (size_t e = 0; e < wf.size(); ++e) wf[e] = kBf16W ? bf16_to_float(wb[e]) : in.uniform(-1.0f, 1.0f);
    const int64_t ldo = s.rows + s.pad;
    auto call = [&](const Kernels& k, float* out, ThreadPool& pool) {
        if constexpr (kBf16W) {
            Bf16Matrix m{wb.data(), s.rows, s.k};
            backend::PackedWeight pw;
            if (prepared && k.prepare_bf16) {
                k.prepare_bf16(m, &pw, pool);
                if (pw.layout != backend::PackedLayout::kNone) m.prepared = &pw;
            }
            k.gemm_f32_bf16w(x.data(), s.n, m, out, ldo, pool);
        } else {
            k.gemm_f32(x.data(), s.n, F32Matrix{wf.data(), s.rows, s.k}, out, ldo, pool);
        }
    };
    ThreadPool ref_pool(2);
    Output2d<float> ref(s.n, s.rows, ldo);
    call(backend::ref::kernels(), ref.data(), ref_pool);
    // bound per output: 2 (k + 1) u sum |x w|
    std::vector<double> bound(s.n * s.rows);
    for (int64_t i = 0; i < s.n; ++i)
        for (int64_t j = 0; j < s.rows; ++j) {
            double a = 0;
            for (int64_t c = 0; c < s.k; ++c) a += std::fabs(double(x[i * s.k + c]) * wf[j * s.k + c]);
            bound[i * s.rows + j] = (prepared ? 4.0 : 2.0) * (s.k + 1) * std::ldexp(1.0, -24) * a + 1e-30;
        }
    for (const Kernels* table : simd_tables())
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(std::string(isa_name(table->isa)) + " threads=" + std::to_string(threads) + " " + describe(s));
            ThreadPool pool(threads);
            Output2d<float> out(s.n, s.rows, ldo);
            call(*table, out.data(), pool);
            EXPECT_EQ(out.integrity(), "");
            int64_t bad = 0;
            for (int64_t i = 0; i < s.n; ++i)
                for (int64_t j = 0; j < s.rows; ++j) {
                    const double d = std::fabs(double(out.data()[i * ldo + j]) - ref.data()[i * ldo + j]);
                    // fp32 weights (the mHC mixes) are computed in the reference's order: bit-identical
                    const double allowed = kBf16W ? bound[i * s.rows + j] : 0.0;
                    if (!(d <= allowed) && bad++ < 5)
                        ADD_FAILURE() << "[" << i << ", " << j << "] ref " << ref.data()[i * ldo + j] << " got "
                                      << out.data()[i * ldo + j] << " bound " << bound[i * s.rows + j];
                }
            EXPECT_EQ(bad, 0);
        }
}

TEST(GemmBf16, Shapes) {
    uint64_t seed = 300;
    for (const Shape& s : kShapes) run_bf16(s, seed++);
}

// wo_a's shape as the spec defines it (a bf16 GEMM on the dequantized weight; the model computes it from the fp8
// codes with gemm_fp8_bf16x, tests/ops/gemm_quant_test.cpp), indexer weights_proj and wk, ratio-1 compressor wkv
// (spec §3.4).
TEST(GemmBf16, ReleasedShapes) {
    run_bf16({1, 8192, 4096, 0}, 1);
    run_bf16({3, 32, 5120, 0}, 2);
    run_bf16({5, 128, 512, 0}, 3);
    run_bf16({16, 512, 5120, 0}, 4);
}

// Prepared weights: gemm_bf16 on AMX tiles where the table has them (kBf16TilesMinRows rows and more, k % 32 == 0):
// one row tile (n <= 16), a pair (n <= 32: its sums in the tiles over all of k), several pairs (k in chunks of
// kBf16TileChunkBlocks blocks, with and without a last short chunk), items of kBf16TileItemRows rows and a last
// short one, a lone last row group, rows past the last full group, output strides past rows, 1-3 threads.
TEST(GemmBf16, PreparedShapes) {
    uint64_t seed = 350;
    for (const Shape& s : kShapes) run_bf16(s, seed++, true);
    const Shape shapes[] = {{1, 64, 32, 0},    {5, 70, 96, 1},     {16, 96, 512, 0},  {17, 80, 256, 2},
                            {32, 128, 320, 0}, {33, 112, 288, 1},  {64, 64, 2048, 0}, {100, 100, 416, 3},
                            {256, 96, 256, 0}, {300, 144, 320, 1}, {520, 64, 96, 0},  {16, 512, 5120, 0},
                            {100, 64, 8192, 1}, {300, 80, 2304, 2}, {300, 80, 4096, 2}};
    for (const Shape& s : shapes) run_bf16(s, seed++, true);
}

// Sums that cancel by construction: x = [a, -a], w = [b, b (1 + ~2^-6)], so each output is -sum a (w2 - b), a few
// percent of its products' magnitudes. Summed in another order than the reference's, outputs may move by several
// ulps there; every table, as it is and prepared (AMX tiles), must stay within compare_bf16_sums' bound -- its fp32
// sums' own rounding -- at every output (a dropped or doubled product is far outside it).
TEST(GemmBf16, CancellingSums) {
    const int64_t n = 40, rows = 70, k = 2048, half = k / 2;
    Inputs in(77);
    std::vector<bf16> x(n * k), w(rows * k);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < half; ++c) {
            x[i * k + c] = float_to_bf16(in.uniform(-1.0f, 1.0f));
            x[i * k + half + c] = float_to_bf16(-bf16_to_float(x[i * k + c]));
        }
    for (int64_t j = 0; j < rows; ++j)
        for (int64_t c = 0; c < half; ++c) {
            const float b = in.uniform(-1.0f, 1.0f);
            w[j * k + c] = float_to_bf16(b);
            w[j * k + half + c] = float_to_bf16(b * (1.0f + in.uniform(-0x1p-6f, 0x1p-6f)));
        }
    ThreadPool pool(2);
    const Bf16Matrix m{w.data(), rows, k};
    std::vector<bf16> ref(n * rows), magnitude(n * rows);
    backend::ref::kernels().gemm_bf16(x.data(), n, m, ref.data(), rows, pool);
    const std::vector<bf16> ax = abs_bf16(x.data(), x.size()), aw = abs_bf16(w.data(), w.size());
    backend::ref::kernels().gemm_bf16(ax.data(), n, Bf16Matrix{aw.data(), rows, k}, magnitude.data(), rows, pool);
    for (const Kernels* table : simd_tables())
        for (bool prepared : {false, true}) {
            SCOPED_TRACE(std::string(isa_name(table->isa)) + (prepared ? " prepared" : ""));
            Bf16Matrix mt = m;
            backend::PackedWeight pw;
            if (prepared && table->prepare_bf16) table->prepare_bf16(m, &pw, pool);
            if (pw.layout != backend::PackedLayout::kNone) mt.prepared = &pw;
            std::vector<bf16> out(n * rows);
            table->gemm_bf16(x.data(), n, mt, out.data(), rows, pool);
            const UlpStats plain = compare_bf16(ref.data(), rows, out.data(), rows, n, rows);
            const UlpStats bounded =
                compare_bf16_sums(ref.data(), rows, out.data(), rows, n, rows, magnitude.data(), rows, kSumOrderRel);
            EXPECT_EQ(check_ulps(bounded, UlpBudget{1, 1.0}), "");
            std::printf("  %s%s: %lld of %lld outputs differ, max %lld ulps (within the sums' bound)\n",
                        isa_name(table->isa).data(), prepared ? " prepared" : "",
                        static_cast<long long>(plain.mismatches), static_cast<long long>(plain.count),
                        static_cast<long long>(plain.worst));
        }
}

TEST(GemmF32Bf16w, Shapes) {
    uint64_t seed = 400;
    for (const Shape& s : kShapes) run_f32<true>(s, seed++);
}

// LM head (a 2048-row slice of 129280 x 5120), router gate (384 x 5120), ratio-2 compressor (512 x 5120).
TEST(GemmF32Bf16w, ReleasedShapes) {
    run_f32<true>({1, 2048, 5120, 0}, 5);
    run_f32<true>({3, 384, 5120, 0}, 6);
    run_f32<true>({9, 512, 5120, 0}, 7);
}

// Prepared weights: on AMX tiles where the table has them (AVX-512 with AMX, weights of kBf16TilesMinRows rows and
// more; the others read the weight as it is), in units of whole passes of four groups and a last part.
TEST(GemmF32Bf16w, PreparedShapes) {
    uint64_t seed = 450;
    for (const Shape& s : kShapes) run_f32<true>(s, seed++, true);
    run_f32<true>({1, 2048, 5120, 0}, 10, true);
    run_f32<true>({16, 300, 5120, 3}, 11, true);
    run_f32<true>({70, 64, 96, 1}, 12, true);
    run_f32<true>({130, 100, 64, 0}, 13, true);
    run_f32<true>({33, 80, 128, 2}, 14, true);
}

// Every bit of x counts: x = 1 + 2^-9 + 2^-23 (whose split into bf16 parts needs all three), -1 and -2^-9 against
// weights of 1 sum to 2^-23 exactly, with no rounding in any order -- so every table, prepared or not, must give
// exactly that (a kernel dropping x's last 8 bits gives 0).
TEST(GemmF32Bf16w, EveryBitOfX) {
    const int64_t n = 3, rows = 70, k = 64;  // (prepared: on tiles from kBf16TilesMinRows rows)
    std::vector<float> x(n * k, 0.0f);
    const float terms[3] = {1.0f + 0x1p-9f + 0x1p-23f, -1.0f, -0x1p-9f};
    for (int64_t i = 0; i < n; ++i)
        for (int t = 0; t < 3; ++t) x[i * k + 7 * t + 5 * i] = terms[t];  // at different columns per row
    std::vector<bf16> w(rows * k, float_to_bf16(1.0f));
    for (const Kernels* table : simd_tables())
        for (bool prepared : {false, true}) {
            SCOPED_TRACE(std::string(isa_name(table->isa)) + (prepared ? " prepared" : ""));
            ThreadPool pool(2);
            Bf16Matrix m{w.data(), rows, k};
            backend::PackedWeight pw;
            if (prepared && table->prepare_bf16) table->prepare_bf16(m, &pw, pool);
            if (pw.layout != backend::PackedLayout::kNone) m.prepared = &pw;
            std::vector<float> out(n * rows, -1.0f);
            table->gemm_f32_bf16w(x.data(), n, m, out.data(), rows, pool);
            for (float v : out) EXPECT_EQ(v, 0x1p-23f);
        }
}

TEST(GemmF32, Shapes) {
    uint64_t seed = 500;
    for (const Shape& s : kShapes) run_f32<false>(s, seed++);
}

// hc_attn_fn / hc_ffn_fn [24, 20480] over the 4-copy stream.
TEST(GemmF32, ReleasedShapes) {
    run_f32<false>({1, 24, 20480, 0}, 8);
    run_f32<false>({10, 24, 20480, 0}, 9);
    run_f32<false>({40, 24, 20480, 0}, 10);  // two tiles of 16 rows in the lanes and 8 rows left
}

// gemm_f32_squares (the mHC mixes and their statistic, bf16 x) against the reference, bit-identical: few rows (a
// decode step: parts of the weight rows over the threads, the squares' chains in lanes beside the first part's sums,
// tiles of up to 8 rows on AVX-512 and 4 on AVX2), whole tiles of 16 rows in the lanes (AVX2: two halves of 8)
// with rows left over, fewer tiles than threads (16-31 rows, or 2 tiles on 3 threads: each tile split by
// weight rows), weight row counts below / at / past the kernel's 24 sums at once, k = 0, with and without 16-column
// tails and past its 256-column chunks.
void run_f32_squares(const Shape& s, uint64_t seed) {
    Inputs in(seed);
    const std::vector<bf16> x = in.bf16s(s.n * s.k, -4.0f, 4.0f);
    const std::vector<float> w = in.floats(s.rows * s.k);
    const F32Matrix m{w.data(), s.rows, s.k};
    ThreadPool ref_pool(2);
    std::vector<float> ref(s.n * s.rows), ref_squares(s.n);
    backend::ref::kernels().gemm_f32_squares(x.data(), s.n, m, ref.data(), ref_squares.data(), ref_pool);
    for (const Kernels* table : simd_tables())
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(std::string(isa_name(table->isa)) + " threads=" + std::to_string(threads) + " " + describe(s));
            ThreadPool pool(threads);
            Output2d<float> out(s.n, s.rows, s.rows), squares(s.n, 1, 1);
            table->gemm_f32_squares(x.data(), s.n, m, out.data(), squares.data(), pool);
            EXPECT_EQ(out.integrity(), "");
            EXPECT_EQ(squares.integrity(), "");
            int64_t bad = 0;
            for (int64_t i = 0; i < s.n; ++i) {
                if (std::memcmp(&squares.data()[i], &ref_squares[i], 4) != 0 && bad++ < 5)
                    ADD_FAILURE() << "squares [" << i << "] ref " << ref_squares[i] << " got " << squares.data()[i];
                for (int64_t j = 0; j < s.rows; ++j)
                    if (std::memcmp(&out.data()[i * s.rows + j], &ref[i * s.rows + j], 4) != 0 && bad++ < 5)
                        ADD_FAILURE() << "[" << i << ", " << j << "] ref " << ref[i * s.rows + j] << " got "
                                      << out.data()[i * s.rows + j];
            }
            EXPECT_EQ(bad, 0);
        }
}

TEST(GemmF32Squares, Shapes) {
    uint64_t seed = 900;
    for (const Shape& s : {Shape{1, 24, 100, 0}, Shape{9, 5, 31, 0}, Shape{16, 24, 300, 0}, Shape{20, 17, 530, 0},
                           Shape{31, 8, 100, 0}, Shape{32, 24, 48, 0}, Shape{33, 8, 300, 0}, Shape{40, 17, 600, 0},
                           Shape{64, 30, 37, 0}, Shape{100, 49, 530, 0}, Shape{48, 24, 0, 0}, Shape{16, 24, 0, 0},
                           Shape{16, 0, 40, 0}, Shape{40, 0, 40, 0}, Shape{1, 0, 40, 0}, Shape{5, 1, 47, 0},
                           Shape{8, 9, 64, 0}, Shape{15, 24, 33, 0}, Shape{4, 12, 20, 0}, Shape{3, 40, 100, 0},
                           Shape{1, 24, 0, 0}})
        run_f32_squares(s, seed++);
}

// hc_attn_fn / hc_ffn_fn [24, 20480] over the 4-copy stream: a decode step, a batch of 16, a prefill's tiles with
// 8 rows left.
TEST(GemmF32Squares, ReleasedShapes) {
    run_f32_squares({1, 24, 20480, 0}, 923);
    run_f32_squares({2, 24, 20480, 0}, 920);
    run_f32_squares({8, 24, 20480, 0}, 924);  // part 0: 8 weight rows beside the 8 rows' squares
    run_f32_squares({16, 24, 20480, 0}, 922);  // a batch of 16: one tile, split by weight rows
    run_f32_squares({72, 24, 20480, 0}, 921);
}

}  // namespace
}  // namespace deepinfer::testing
