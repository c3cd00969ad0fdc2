// Row invariance of every kernel table (the scalar one included): the result for one activation row
// (one query, one key) must be bit-identical whatever batch it is computed in — how many rows come with
// it, where it sits, how many threads run, whether the weight was prepared. The engine's invariants
// (chunked, batched, preempted and speculative runs give the one-shot greedy tokens, ARCHITECTURE.md
// "Testing") rest on this: a kernel that picks another summation order for 16 rows than for 1 breaks them.
#include <gtest/gtest.h>

#include "backend/kernels.h"
#include "op_harness.h"

namespace deepinfer::testing {
namespace {

using backend::Bf16Matrix;
using backend::F32Matrix;
using backend::Fp4Matrix;
using backend::Fp8Acts;
using backend::Fp8Matrix;
using backend::Kernels;
using backend::PackedWeight;

std::vector<const Kernels*> all_tables() {
    std::vector<const Kernels*> t = simd_tables();
    t.push_back(&backend::ref::kernels());
    return t;
}

// Row windows [start, start + count) of a batch of kRows rows: single rows at both ends and in the middle,
// and counts below, at and above every tile and path threshold the kernels use (3, 4, 8, 16, 64; 5 and 7: the AVX2
// fp8 stream's turns of 3 + 2 and 4 + 3 rows where ymm ops issue as halves).
constexpr int64_t kRows = 70;
const std::pair<int64_t, int64_t> kWindows[] = {{0, 1},  {69, 1},  {33, 1},  {1, 2},   {5, 3},  {2, 4},
                                                {6, 5},  {7, 7},   {3, 8},   {9, 9},   {0, 15}, {4, 16},
                                                {11, 17}, {20, 33}, {1, 64}, {0, 65}, {0, 70}};

bool is_nan(float v) { return std::isnan(v); }
bool is_nan(bf16 v) { return std::isnan(bf16_to_float(v)); }
bool is_nan(uint8_t) { return false; }

// Compare the window's rows (row stride ld) with the same rows of the whole batch, bit for bit -- except that
// any NaN equals any NaN: x86 gives the default NaN (sign set) to an invalid operation and passes an input
// NaN on as it is, so a NaN's sign depends on which operation met it first (NaN activation or scale codes).
template <class T>
void expect_rows_equal(const std::vector<T>& whole, const std::vector<T>& part, int64_t start, int64_t count,
                       int64_t row_elems, const std::string& what) {
    int64_t bad = 0;
    for (int64_t i = 0; i < count; ++i)
        for (int64_t j = 0; j < row_elems; ++j) {
            const T& a = whole[(start + i) * row_elems + j];
            const T& b = part[i * row_elems + j];
            if (std::memcmp(&a, &b, sizeof(T)) != 0 && !(is_nan(a) && is_nan(b)) && bad++ < 3)
                ADD_FAILURE() << what << ": row " << start + i << " col " << j << " differs when computed in rows ["
                              << start << ", " << start + count << ")";
        }
    EXPECT_EQ(bad, 0) << what;
}

// Runs `op(table, start, count, threads, out)` for every window and thread count, against the whole
// batch on one thread.
template <class T, class Op>
void check_windows(const std::string& name, int64_t row_elems, const Op& op) {
    for (const Kernels* table : all_tables()) {
        std::vector<T> whole(kRows * row_elems);
        op(*table, 0, kRows, 1, whole.data());
        for (int threads : {1, 2, 3})
            for (auto [start, count] : kWindows) {
                std::vector<T> part(count * row_elems);
                op(*table, start, count, threads, part.data());
                expect_rows_equal(whole, part, start, count, row_elems,
                                  fmt::format("{} {} threads={}", name, isa_name(table->isa), threads));
            }
    }
}

TEST(RowInvariance, ActQuant) {
    constexpr int64_t k = 160;
    Inputs in(11);
    std::vector<bf16> x = in.bf16s(kRows * k, -40.0f, 40.0f);
    check_windows<uint8_t>("act_quant", k + k / 32, [&](const Kernels& t, int64_t s, int64_t n, int th, uint8_t* out) {
        ThreadPool pool(th);
        std::vector<uint8_t> codes(n * k), scales(n * k / 32);
        t.act_quant(x.data() + s * k, n, k, codes.data(), scales.data(), pool);
        for (int64_t i = 0; i < n; ++i) {
            std::memcpy(out + i * (k + k / 32), codes.data() + i * k, k);
            std::memcpy(out + i * (k + k / 32) + k, scales.data() + i * (k / 32), k / 32);
        }
    });
}

// w as table t uses it: prepared into *packed (the caller keeps it) or canonical.
template <class Matrix>
Matrix as_used(const Kernels& t, const Matrix& w, bool prepared, PackedWeight* packed, ThreadPool& pool) {
    Matrix wt = w;
    if (!prepared) return wt;
    if constexpr (std::is_same_v<Matrix, Fp8Matrix>) {
        t.prepare_fp8(w, packed, pool);
    } else if constexpr (std::is_same_v<Matrix, Bf16Matrix>) {
        // (where the table makes a layout: AVX-512 with AMX)
        if (!t.prepare_bf16) return wt;
        t.prepare_bf16(w, packed, pool);
        if (packed->layout == backend::PackedLayout::kNone) return wt;
    } else {
        t.prepare_fp4(w, packed, pool);
    }
    wt.prepared = packed;
    return wt;
}

// fp8 weights, prepared and canonical: both must give the same bits too (a weight is prepared at load
// on one rank and may be sliced canonical on another).
TEST(RowInvariance, GemmFp8) {
    for (int64_t rows : {48, 129})
        for (int64_t k : {64, 544}) {
            Inputs in(rows * 1000 + k);
            QuantizedActs acts(in, kRows, k);
            const int64_t scale_rows = (rows + 31) / 32;
            std::vector<uint8_t> codes = in.e4m3_codes(rows * k), scales = in.bytes(scale_rows * (k / 32), 112, 134);
            const Fp8Matrix w{codes.data(), scales.data(), rows, k};
            for (bool f32_out : {false, true})
                for (bool prepared : {false, true}) {
                    auto run = [&](const Kernels& t, int64_t s, int64_t n, int th, auto* out) {
                        ThreadPool pool(th);
                        PackedWeight packed;
                        const Fp8Matrix wt = as_used(t, w, prepared, &packed, pool);
                        if constexpr (std::is_same_v<std::remove_pointer_t<decltype(out)>, float>)
                            t.gemm_fp8_f32(acts.rows(s, n), wt, out, rows, pool);
                        else t.gemm_fp8(acts.rows(s, n), wt, out, rows, pool);
                    };
                    const std::string name = fmt::format("gemm_fp8{} rows={} k={} {}", f32_out ? "_f32" : "", rows, k,
                                                         prepared ? "prepared" : "canonical");
                    if (f32_out)
                        check_windows<float>(name, rows, [&](const Kernels& t, int64_t s, int64_t n, int th,
                                                             float* out) { run(t, s, n, th, out); });
                    else
                        check_windows<bf16>(name, rows, [&](const Kernels& t, int64_t s, int64_t n, int th,
                                                            bf16* out) { run(t, s, n, th, out); });
                }
        }
}

// The AMX fp8 kernel's work items of many rows: from 97 rows (four passes over two row tiles) each chunk of k is
// decoded during the step before; a row's bits are those it gets in batches of fewer rows (decoded in their step),
// over runs of pairs with a lone last group, chunks with a short last one, and a second item.
TEST(RowInvariance, GemmFp8TileItems) {
    constexpr int64_t n = 300, rows = 100;
    for (int64_t k : {608, 1280}) {
        Inputs in(k + 5);
        QuantizedActs acts(in, n, k);
        std::vector<uint8_t> codes = in.e4m3_codes(rows * k), scales = in.bytes((rows + 31) / 32 * (k / 32), 112, 134);
        const Fp8Matrix w{codes.data(), scales.data(), rows, k};
        for (const Kernels* table : all_tables()) {
            // the whole batch on one thread (each unit prepares its activations), the windows on three (the
            // activations of an item made ready once, in slices of 16 rows, where the items span many units)
            ThreadPool one(1), pool(3);
            PackedWeight packed;
            const Fp8Matrix wt = as_used(*table, w, true, &packed, pool);
            std::vector<bf16> whole(n * rows);
            table->gemm_fp8(acts.rows(0, n), wt, whole.data(), rows, one);
            for (auto [start, count] : {std::pair<int64_t, int64_t>{0, 1}, {3, 64}, {100, 96}, {250, 50}, {7, 200},
                                        {0, 300}}) {
                std::vector<bf16> part(count * rows);
                table->gemm_fp8(acts.rows(start, count), wt, part.data(), rows, pool);
                expect_rows_equal(whole, part, start, count, rows,
                                  fmt::format("gemm_fp8 {} k={}", isa_name(table->isa), k));
            }
        }
    }
}

// Activations made ready once for the pool (gemm_quant: a GEMM's items spanning many units, few weight rows a
// thread) go in waves of items of at most 32 MB; 9000 rows of k = 2048 take two to three of them on every table
// (4-8 KB a row). The whole batch on one thread (each thread preparing its own) gives the same bits.
TEST(RowInvariance, GemmQuantSharedActivationsInWaves) {
    constexpr int64_t n = 9000, rows = 64, k = 2048;
    Inputs in(31);
    QuantizedActs acts(in, n, k);
    std::vector<uint8_t> codes = in.e4m3_codes(rows * k), scales = in.bytes((rows + 31) / 32 * (k / 32), 112, 134);
    std::vector<uint8_t> packed = in.bytes(rows * k / 2), fp4_scales = in.bytes(rows * k / 32, 112, 134);
    const Fp8Matrix w8{codes.data(), scales.data(), rows, k};
    const Fp4Matrix w4{packed.data(), fp4_scales.data(), rows, k};
    for (const Kernels* table : simd_tables()) {
        ThreadPool one(1), pool(3);
        PackedWeight p8, p4;
        const Fp8Matrix wt8 = as_used(*table, w8, true, &p8, pool);
        const Fp4Matrix wt4 = as_used(*table, w4, true, &p4, pool);
        std::vector<bf16> whole(n * rows), shared(n * rows);
        table->gemm_fp8(acts.all(), wt8, whole.data(), rows, one);
        table->gemm_fp8(acts.all(), wt8, shared.data(), rows, pool);
        expect_rows_equal(whole, shared, 0, n, rows, fmt::format("gemm_fp8 {}", isa_name(table->isa)));
        table->gemm_fp4(acts.all(), wt4, whole.data(), rows, one);
        table->gemm_fp4(acts.all(), wt4, shared.data(), rows, pool);
        expect_rows_equal(whole, shared, 0, n, rows, fmt::format("gemm_fp4 {}", isa_name(table->isa)));
    }
}

// Rows and weight pairs that the AMX fp8 kernel keeps on its tiles beside ones it sends to the vdpbf16ps kernel
// (widen_fp8_scales): a row's bits do not depend on its neighbours' path either.
TEST(RowInvariance, GemmFp8OperandWindow) {
    constexpr int64_t rows = 100, k = 256;
    Inputs in(41);
    QuantizedActs acts(in, kRows, k);
    std::vector<uint8_t> codes = in.e4m3_codes(rows * k), scales = in.bytes(4 * (k / 32), 112, 134);
    widen_fp8_scales(acts, scales, 4);
    const Fp8Matrix w{codes.data(), scales.data(), rows, k};
    for (bool prepared : {false, true})
        check_windows<bf16>(fmt::format("gemm_fp8 window {}", prepared ? "prepared" : "canonical"), rows,
                            [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
                                ThreadPool pool(th);
                                PackedWeight packed;
                                const Fp8Matrix wt = as_used(t, w, prepared, &packed, pool);
                                t.gemm_fp8(acts.rows(s, n), wt, out, rows, pool);
                            });
}

TEST(RowInvariance, GemmFp8Bf16x) {
    for (int64_t rows : {48, 129})
        for (int64_t k : {64, 544}) {
            Inputs in(rows * 1000 + k + 2);
            std::vector<bf16> x = in.bf16s(kRows * k, -3.0f, 3.0f);
            const int64_t scale_rows = (rows + 31) / 32;
            std::vector<uint8_t> codes = in.e4m3_codes(rows * k), scales = in.bytes(scale_rows * (k / 32), 112, 134);
            const Fp8Matrix w{codes.data(), scales.data(), rows, k};
            for (bool prepared : {false, true})
                check_windows<bf16>(
                    fmt::format("gemm_fp8_bf16x rows={} k={} {}", rows, k, prepared ? "prepared" : "canonical"), rows,
                    [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
                        ThreadPool pool(th);
                        PackedWeight packed;
                        const Fp8Matrix wt = as_used(t, w, prepared, &packed, pool);
                        t.gemm_fp8_bf16x(x.data() + s * k, n, wt, out, rows, pool);
                    });
        }
}

TEST(RowInvariance, GemmFp4) {
    for (int64_t rows : {48, 129})
        for (int64_t k : {64, 544}) {
            Inputs in(rows * 1000 + k + 1);
            QuantizedActs acts(in, kRows, k);
            std::vector<uint8_t> packed = in.bytes(rows * k / 2), scales = in.bytes(rows * k / 32, 112, 134);
            const Fp4Matrix w{packed.data(), scales.data(), rows, k};
            for (bool prepared : {false, true})
                check_windows<bf16>(fmt::format("gemm_fp4 rows={} k={} {}", rows, k, prepared ? "prepared" : "canonical"),
                                    rows, [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
                                        ThreadPool pool(th);
                                        PackedWeight pw;
                                        const Fp4Matrix wt = as_used(t, w, prepared, &pw, pool);
                                        t.gemm_fp4(acts.rows(s, n), wt, out, rows, pool);
                                    });
        }
}

// Rows and weight pairs at the edges of the AMX MXFP4 kernel's window (edge_fp4_operands), on its tiles beside
// ones it sends to the per-block kernel: every row gives its bits of one row alone (the integer kernel).
TEST(RowInvariance, GemmFp4OperandWindow) {
    constexpr int64_t rows = 100, k = 256;
    Inputs in(43);
    QuantizedActs acts(in, kRows, k);
    std::vector<uint8_t> packed = in.bytes(rows * k / 2), scales = in.bytes(rows * k / 32, 112, 134);
    edge_fp4_operands(acts, scales, rows);
    const Fp4Matrix w{packed.data(), scales.data(), rows, k};
    for (bool prepared : {false, true})
        check_windows<bf16>(fmt::format("gemm_fp4 window {}", prepared ? "prepared" : "canonical"), rows,
                            [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
                                ThreadPool pool(th);
                                PackedWeight pw;
                                const Fp4Matrix wt = as_used(t, w, prepared, &pw, pool);
                                t.gemm_fp4(acts.rows(s, n), wt, out, rows, pool);
                            });
}

// Activation codes made block by block to reach every case of the AVX2 integer MXFP4 kernels: the GEMV reads a single
// row as exact integers where a block's values fit two int8 planes, on a third plane where they fit three and no
// partial sum rounds, and runs the fp32 chain elsewhere (gemv_fp4_int_avx2.cpp; 2-4 rows likewise, the rows' cases
// mixed within a block: gemm_fp4_few_rows_avx2.cpp); the panel GEMM of 5-64 rows takes int16 words, shifted with the
// dropped low bits added back for wider blocks, and the chain where a partial sum could round (gemm_fp4_int_avx2.cpp).
// Single rows and windows must give the batch's bits in every case. Wide, NaN and zero blocks and extreme scale codes
// are worth a row-invariance check on every table anyway. Without extreme_scales the rows keep act_quant's scales (the
// AMX kernel's sums over k take them, with the chains of the blocks without exact sums).
QuantizedActs mixed_fp4_acts(Inputs& in, int64_t n, int64_t k, bool extreme_scales) {
    QuantizedActs a(in, n, k);
    auto code = [&](int e, int m, bool negative) { return static_cast<uint8_t>((negative ? 0x80 : 0) | e << 3 | m); };
    for (int64_t b = 0; b < n * k / 32; ++b) {
        uint8_t* c = a.codes.data() + b * 32;
        // block 1 of most rows chained, so that a 16-row tile's block holds more such rows than the AMX kernel
        // folds into its sums at once (gemm_fp4_amx_sums.cpp, kChainSlots)
        const int drawn = in.uniform_int(0, 8);
        const int kind = b % (k / 32) == 1 && b / (k / 32) % 16 < 13 ? 6 : drawn;
        const int e_low = in.uniform_int(0, 4);
        for (int j = 0; j < 32; ++j) {
            const bool negative = in.uniform_int(0, 1) == 1;
            switch (kind) {
                case 0:  // exponents e_low .. e_low + 10 (subnormals when e_low = 0): two planes
                    c[j] = code(e_low + in.uniform_int(0, 10), in.uniform_int(0, 7), negative);
                    break;
                case 1:  // any finite code, subnormals to 448: mostly wider than two planes
                    c[j] = code(in.uniform_int(0, 15), in.uniform_int(0, 7), negative);
                    if ((c[j] & 0x7f) == 0x7f) c[j] ^= 1;
                    break;
                case 2:  // spread 12 (the edge): 8 * 2^12 fits two planes as -32768 only
                    c[j] = j == 0 ? code(13, 0, in.uniform_int(0, 1) == 1) : code(1, in.uniform_int(0, 7), negative);
                    break;
                case 3:  // zeros of both signs, one value
                    c[j] = j == 7 ? code(in.uniform_int(1, 15), in.uniform_int(0, 6), negative)
                                  : code(0, 0, negative);
                    break;
                case 4:  // all zeros
                    c[j] = code(0, 0, negative);
                    break;
                case 6:  // 31 values of magnitude 448 and a subnormal: words shifted by 3 hold them, but the
                         // partial sums pass 2^24 units where the weights agree in sign, and the fp32 chain rounds
                    c[j] = j == 17 ? code(0, in.uniform_int(1, 7), negative) : code(15, 6, negative);
                    break;
                case 5:  // a NaN code among narrow values
                    c[j] = j == 5 ? code(15, 7, negative)
                                  : code(8 + in.uniform_int(0, 3), in.uniform_int(0, 7), negative);
                    break;
                default:  // as act_quant made it
                    break;
            }
        }
        // scale codes beyond act_quant's: 2^-127 (subnormal), 2^127 and NaN now and then
        const int s = extreme_scales ? in.uniform_int(0, 40) : 40;
        if (s == 0) a.scales[b] = 0;
        else if (s == 1) a.scales[b] = 254;
        else if (s == 2) a.scales[b] = 255;
    }
    return a;
}

TEST(RowInvariance, GemmFp4MixedBlocks) {
    for (int64_t rows : {48, 129})
        for (int64_t k : {64, 544}) {
            Inputs in(rows * 1000 + k + 5);
            const QuantizedActs mixed = mixed_fp4_acts(in, kRows, k, true);
            const QuantizedActs plain_scales = mixed_fp4_acts(in, kRows, k, false);
            std::vector<uint8_t> packed = in.bytes(rows * k / 2), scales = in.bytes(rows * k / 32, 100, 150);
            std::vector<uint8_t> extreme = scales;  // weight scale codes 0 and 255 too (not PackedWeight::plain_scales)
            for (size_t i = 0; i < extreme.size(); i += 7) extreme[i] = i % 2 ? 0 : 255;
            for (const auto& [acts, sw] : {std::pair{&mixed, &scales}, std::pair{&mixed, &extreme},
                                           std::pair{&plain_scales, &scales}}) {
                const Fp4Matrix w{packed.data(), sw->data(), rows, k};
                // alone and as one GEMM of a grouped call (the MoE's route)
                for (bool grouped : {false, true})
                    check_windows<bf16>(fmt::format("gemm_fp4 mixed blocks rows={} k={}{}{}{}", rows, k,
                                                    acts == &plain_scales ? " act_quant scales" : "",
                                                    sw == &extreme ? " extreme scales" : "", grouped ? " grouped" : ""),
                                        rows, [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
                                            ThreadPool pool(th);
                                            PackedWeight pw;
                                            const Fp4Matrix wt = as_used(t, w, true, &pw, pool);
                                            if (!grouped) return t.gemm_fp4(acts->rows(s, n), wt, out, rows, pool);
                                            const backend::Fp4Gemm g{acts->rows(s, n), wt, out, rows};
                                            t.gemm_fp4_grouped(&g, 1, pool);
                                        });
            }
        }
}

// Every weight pair outside the AMX MXFP4 kernel's window (a scale code of 2^-60 in each), so that all rows of every
// item go to the per-block kernels (gemm_pair_apart): rows 0-63 hold narrow blocks (exact sums), the rest blocks whose
// partial sums round (+448 x 6 fifteen times, 2^-9 x 0.5 beside -448 x 6, -448 x 6 fourteen times more: the fp32
// chain's 0).
TEST(RowInvariance, GemmFp4PairsApart) {
    constexpr int64_t rows = 64, k = 128;
    static_assert(kRows > 64, "rows past the first item");
    Inputs in(71);
    QuantizedActs acts(in, kRows, k);
    for (int64_t i = 0; i < kRows * k; ++i) {
        const int64_t j = i % 32;
        acts.codes[static_cast<size_t>(i)] =
            i / k < 64 ? static_cast<uint8_t>(in.uniform_int(0, 1) << 7 | in.uniform_int(4, 14) << 3 | in.uniform_int(0, 7))
            : j < 15   ? uint8_t{0x7e}  // 448
            : j == 15  ? uint8_t{0}
            : j == 17  ? uint8_t{0x01}  // 2^-9
                       : uint8_t{0xfe};
    }
    std::vector<uint8_t> packed(rows * k / 2, 0x77), scales = in.bytes(rows * k / 32, 112, 134);  // e2m1 6.0
    for (int64_t b = 8; b < rows * k / 2; b += 16) packed[static_cast<size_t>(b)] = 0x17;  // element 17: 0.5
    for (int64_t r = 0; r < rows; r += 32) scales[r * (k / 32)] = 67;
    const Fp4Matrix w{packed.data(), scales.data(), rows, k};
    check_windows<bf16>("gemm_fp4 pairs apart", rows, [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
        ThreadPool pool(th);
        PackedWeight pw;
        const Fp4Matrix wt = as_used(t, w, true, &pw, pool);
        t.gemm_fp4(acts.rows(s, n), wt, out, rows, pool);
    });
}

TEST(RowInvariance, DenseGemms) {
    for (int64_t rows : {5, 48, 129})
        for (int64_t k : {31, 64, 544}) {
            Inputs in(rows * 1000 + k + 2);
            std::vector<bf16> xb = in.bf16s(kRows * k), wb = in.bf16s(rows * k);
            std::vector<float> xf = in.floats(kRows * k), wf = in.floats(rows * k);
            const std::string shape = fmt::format("rows={} k={}", rows, k);
            // as they are, and prepared by each table (AVX-512 with AMX: both bf16 weight GEMMs on tiles, every n)
            for (bool prepared : {false, true}) {
                const std::string how = prepared ? " prepared " : " ";
                check_windows<bf16>("gemm_bf16" + how + shape, rows,
                                    [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
                                        ThreadPool pool(th);
                                        PackedWeight pw;
                                        const Bf16Matrix m =
                                            as_used(t, Bf16Matrix{wb.data(), rows, k}, prepared, &pw, pool);
                                        t.gemm_bf16(xb.data() + s * k, n, m, out, rows, pool);
                                    });
                check_windows<float>("gemm_f32_bf16w" + how + shape, rows,
                                     [&](const Kernels& t, int64_t s, int64_t n, int th, float* out) {
                                         ThreadPool pool(th);
                                         PackedWeight pw;
                                         const Bf16Matrix m =
                                             as_used(t, Bf16Matrix{wb.data(), rows, k}, prepared, &pw, pool);
                                         t.gemm_f32_bf16w(xf.data() + s * k, n, m, out, rows, pool);
                                     });
            }
            check_windows<float>("gemm_f32 " + shape, rows,
                                 [&](const Kernels& t, int64_t s, int64_t n, int th, float* out) {
                                     ThreadPool pool(th);
                                     t.gemm_f32(xf.data() + s * k, n, F32Matrix{wf.data(), rows, k}, out, rows, pool);
                                 });
        }
}

// gemm_bf16 on AMX tiles past one work item (kBf16TileItemRows rows; 64 at k = 8192): rows of a later item, and rows
// alone, give the bits they give in the whole batch.
TEST(RowInvariance, GemmBf16PreparedItems) {
    constexpr int64_t n = 300, rows = 80;
    for (const Kernels* table : all_tables())
        for (int64_t k : {288, 8192}) {
            Inputs in(77 + k);
            const std::vector<bf16> x = in.bf16s(n * k), w = in.bf16s(rows * k);
            ThreadPool pool(2);
            PackedWeight pw;
            const Bf16Matrix m = as_used(*table, Bf16Matrix{w.data(), rows, k}, true, &pw, pool);
            std::vector<bf16> whole(n * rows);
            table->gemm_bf16(x.data(), n, m, whole.data(), rows, pool);
            for (auto [start, count] : {std::pair<int64_t, int64_t>{255, 3}, {240, 60}, {299, 1}, {0, 1}, {256, 33},
                                        {63, 2}, {130, 70}}) {
                std::vector<bf16> part(count * rows);
                table->gemm_bf16(x.data() + start * k, count, m, part.data(), rows, pool);
                expect_rows_equal(whole, part, start, count, rows,
                                  fmt::format("gemm_bf16 {} k={}", isa_name(table->isa), k));
            }
        }
}

// Queries are the rows; each query's top-k list names the same keys whatever the batch.
TEST(RowInvariance, SparseAttn) {
    // (64 heads of 512: the released shape, whose heads a task splits 64 / 32 / 16 / 8 ways by batch and threads)
    for (auto [heads, dim, topk] : {std::tuple{2, 64, 12}, std::tuple{8, 128, 80}, std::tuple{64, 512, 130}}) {
        Inputs in(heads * 100 + topk);
        constexpr int64_t n_kv = 300;
        std::vector<bf16> q = in.bf16s(kRows * heads * dim, -3.0f, 3.0f), kv = in.bf16s(n_kv * dim, -2.0f, 2.0f);
        std::vector<int32_t> idx(kRows * topk);
        for (auto& j : idx) j = in.uniform(0.0f, 1.0f) < 0.2f ? -1 : in.uniform_int(0, n_kv - 1);
        std::vector<float> sink = in.floats(heads, -2.0f, 2.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
        check_windows<bf16>(fmt::format("sparse_attn heads={} dim={} topk={}", heads, dim, topk), heads * dim,
                            [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
                                ThreadPool pool(th);
                                t.sparse_attn(q.data() + s * heads * dim, n, heads, dim, kv.data(),
                                              idx.data() + s * topk, topk, sink.data(), scale, out, pool);
                            });
    }
}

// Indexer scores are invariant in both directions: in the queries of the batch, and in how many keys
// exist (a chunked prefill scores a query against fewer compressed keys than a one-shot one).
TEST(RowInvariance, IndexScores) {
    for (auto [heads, dim] : {std::pair{2, 64}, std::pair{8, 128}}) {
        Inputs in(heads * 7 + dim);
        constexpr int64_t n_keys = 90;
        std::vector<bf16> q = in.bf16s(kRows * heads * dim, -2.0f, 2.0f), keys = in.bf16s(n_keys * dim, -2.0f, 2.0f);
        std::vector<bf16> w(kRows * heads);
        for (auto& v : w) v = float_to_bf16(in.uniform(-1.0f, 1.0f) / 64.0f);
        const std::string shape = fmt::format("heads={} dim={}", heads, dim);
        check_windows<float>("index_scores (queries) " + shape, n_keys,
                             [&](const Kernels& t, int64_t s, int64_t n, int th, float* out) {
                                 ThreadPool pool(th);
                                 t.index_scores(q.data() + s * heads * dim, n, heads, dim, keys.data(), n_keys,
                                                w.data() + s * heads, out, n_keys, pool);
                             });
        // keys as the rows: every query against key windows
        for (const Kernels* table : all_tables()) {
            ThreadPool pool(1);
            std::vector<float> whole(kRows * n_keys);
            table->index_scores(q.data(), kRows, heads, dim, keys.data(), n_keys, w.data(), whole.data(), n_keys, pool);
            for (int threads : {1, 2, 3})
                for (auto [start, count] : {std::pair<int64_t, int64_t>{0, 1}, {0, 15}, {3, 16}, {10, 17}, {0, 64},
                                            {89, 1}, {40, 50}}) {
                    ThreadPool p(threads);
                    std::vector<float> part(kRows * count);
                    table->index_scores(q.data(), kRows, heads, dim, keys.data() + start * dim, count, w.data(),
                                        part.data(), count, p);
                    int64_t bad = 0;
                    for (int64_t i = 0; i < kRows; ++i)
                        for (int64_t j = 0; j < count; ++j)
                            if (part[i * count + j] != whole[i * n_keys + start + j] && bad++ < 3)
                                ADD_FAILURE() << "index_scores " << isa_name(table->isa) << " " << shape
                                              << " threads=" << threads << ": query " << i << " key " << start + j
                                              << " differs when scored among keys [" << start << ", "
                                              << start + count << ")";
                    EXPECT_EQ(bad, 0);
                }
        }
    }
}

// The row-wise ops: SwiGLU and Sinkhorn run a SIMD exp (not the scalar table's expf) and Sinkhorn puts rows in
// the lanes of one register, so a row's bits must not depend on its lane or its batch either.
TEST(RowInvariance, RowwiseOps) {
    constexpr int inter = 300, dim = 200, hc = 4, mix = (2 + hc) * hc;
    Inputs in(17);
    const std::vector<bf16> gate = in.bf16s(kRows * inter, -12.0f, 12.0f), up = in.bf16s(kRows * inter, -12.0f, 12.0f);
    const std::vector<float> rw = in.floats(kRows, 0.0f, 2.0f);
    check_windows<bf16>("swiglu", inter, [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
        ThreadPool pool(th);
        t.swiglu(gate.data() + s * inter, up.data() + s * inter, n, inter, 10.0f, rw.data() + s, out, pool);
    });
    const std::vector<bf16> x = in.bf16s(kRows * dim, -5.0f, 5.0f), w = in.bf16s(dim, -2.0f, 2.0f);
    check_windows<bf16>("rms_norm", dim, [&](const Kernels& t, int64_t s, int64_t n, int th, bf16* out) {
        ThreadPool pool(th);
        t.rms_norm(x.data() + s * dim, n, dim, w.data(), 1e-6f, out, pool);
    });
    const std::vector<float> mixes = in.floats(kRows * mix, -3.0f, 3.0f), base = in.floats(mix, -1.0f, 1.0f);
    const float scale[3] = {0.7f, 1.3f, 2.1f};
    constexpr int per_row = 2 * hc + hc * hc;
    check_windows<float>("hc_sinkhorn", per_row, [&](const Kernels& t, int64_t s, int64_t n, int th, float* out) {
        ThreadPool pool(th);
        std::vector<float> pre(n * hc), post(n * hc), comb(n * hc * hc);
        t.hc_sinkhorn(mixes.data() + s * mix, n, scale, base.data(), hc, 20, 1e-6f, pre.data(), post.data(),
                      comb.data(), pool);
        for (int64_t i = 0; i < n; ++i) {
            std::copy(pre.begin() + i * hc, pre.begin() + (i + 1) * hc, out + i * per_row);
            std::copy(post.begin() + i * hc, post.begin() + (i + 1) * hc, out + i * per_row + hc);
            std::copy(comb.begin() + i * hc * hc, comb.begin() + (i + 1) * hc * hc, out + i * per_row + 2 * hc);
        }
    });
}

}  // namespace
}  // namespace deepinfer::testing
