// The row-wise ops of every SIMD table against the scalar reference (op harness: guarded outputs, 1-3
// threads). Budgets: RMSNorm, RoPE, top-k, the Engram gather and the cache records' unpack bit for bit (the same
// fp32 operations in the same order); SwiGLU and the pair pooling within 1 bf16 ulp in at most 1% of the outputs
// (exp() to about 1 ulp instead of expf); Sinkhorn within 4e-6 relative (the exp differences through 20
// normalizations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/kernels.h"
#include "backend/ref/ref_kernels.h"
#include "core/quant_records.h"
#include "op_harness.h"

namespace deepinfer::testing {
namespace {

using backend::Kernels;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Every output of a bf16 op written, nothing outside it, and equal to the reference within the budget.
void expect_bf16_outputs(const Guarded<bf16>& got, const std::vector<bf16>& want, const UlpBudget& budget) {
    ASSERT_TRUE(got.guards_intact()) << "guard bytes overwritten";
    for (size_t i = 0; i < want.size(); ++i) ASSERT_FALSE(got.untouched(i)) << "output " << i << " not written";
    const int64_t n = static_cast<int64_t>(want.size());
    EXPECT_EQ(check_ulps(compare_bf16(want.data(), n, got.data(), n, 1, n), budget), "");
}

constexpr UlpBudget kExact{0, 0.0};
constexpr UlpBudget kOneUlpRarely{1, 0.01};

// Rows with a few special values: NaN, infinities, signed zeros (when the row is long enough).
std::vector<bf16> rows_with_specials(Inputs& in, int64_t n, int dim, float lo, float hi, bool specials) {
    std::vector<bf16> v = in.bf16s(static_cast<size_t>(n * dim), lo, hi);
    if (specials && dim >= 8 && n >= 2) {
        v[dim + 1] = float_to_bf16(kNaN);
        v[dim + 3] = float_to_bf16(kInf);
        v[dim + 5] = float_to_bf16(-kInf);
        v[2] = bf16{0x8000};
    }
    return v;
}

TEST(RowwiseOps, RmsNormIsTheReferenceBitForBit) {
    Inputs in(11);
    for (int dim : {5120, 512, 128, 100, 17, 1})
        for (int64_t n : {1, 3, 64}) {
            std::vector<bf16> x = rows_with_specials(in, n, dim, -4.0f, 4.0f, dim > 100);
            // An order-sensitive row: 2^12 in column 0 then many small squares (sums that round differently
            // in another order), and one row of zeros (rsqrt of eps).
            for (int k = 0; k < dim; ++k) x[k] = float_to_bf16(k == 0 ? 4096.0f : 0.75f + 0.001f * (k % 7));
            if (n >= 3)
                for (int k = 0; k < dim; ++k) x[2 * dim + k] = bf16{0};
            const std::vector<bf16> w = in.bf16s(dim, -2.0f, 2.0f);
            ThreadPool one(1);
            std::vector<bf16> want(n * dim);
            backend::ref::kernels().rms_norm(x.data(), n, dim, w.data(), 1e-6f, want.data(), one);
            for (const Kernels* table : simd_tables())
                for (int threads : {1, 2, 3}) {
                    SCOPED_TRACE(fmt::format("{} threads {} n {} dim {}", isa_name(table->isa), threads, n, dim));
                    ThreadPool pool(threads);
                    Guarded<bf16> got(n * dim);
                    table->rms_norm(x.data(), n, dim, w.data(), 1e-6f, got.data(), pool);
                    expect_bf16_outputs(got, want, kExact);
                }
        }
}

TEST(RowwiseOps, RmsNormSumsInSixteenLanes) {
    // The documented order, independently: 16 lane sums joined by halving, against a row where a sequential
    // sum differs (2^24 then ones: each 1 is lost sequentially, kept in lanes 1-15).
    const int dim = 64;
    std::vector<bf16> x(dim, float_to_bf16(1.0f));
    x[0] = float_to_bf16(4096.0f);  // 4096^2 = 2^24
    float lane[16] = {};
    for (int k = 0; k < dim; ++k) lane[k % 16] += bf16_to_float(x[k]) * bf16_to_float(x[k]);
    for (int h = 8; h >= 1; h /= 2)
        for (int i = 0; i < h; ++i) lane[i] += lane[i + h];
    float sequential = 0.0f;
    for (int k = 0; k < dim; ++k) sequential += bf16_to_float(x[k]) * bf16_to_float(x[k]);
    ASSERT_NE(lane[0], sequential) << "the row must tell the orders apart";
    EXPECT_EQ(backend::ref::rms_sum_squares(x.data(), dim), lane[0]);
}

TEST(RowwiseOps, SwigluWithinOneUlp) {
    Inputs in(12);
    for (int inter : {2304, 300, 7})
        for (int64_t n : {1, 5, 40})
            for (float limit : {10.0f, 0.0f})
                for (bool weighted : {false, true}) {
                    std::vector<bf16> gate = rows_with_specials(in, n, inter, -14.0f, 14.0f, true);
                    std::vector<bf16> up = rows_with_specials(in, n, inter, -14.0f, 14.0f, false);
                    std::vector<float> rw = in.floats(n, 0.0f, 2.0f);
                    const float* row_weight = weighted ? rw.data() : nullptr;
                    ThreadPool one(1);
                    std::vector<bf16> want(n * inter);
                    backend::ref::kernels().swiglu(gate.data(), up.data(), n, inter, limit, row_weight, want.data(), one);
                    for (const Kernels* table : simd_tables())
                        for (int threads : {1, 3}) {
                            SCOPED_TRACE(fmt::format("{} threads {} n {} inter {} limit {} weighted {}",
                                                     isa_name(table->isa), threads, n, inter, limit, weighted));
                            ThreadPool pool(threads);
                            Guarded<bf16> got(n * inter);
                            table->swiglu(gate.data(), up.data(), n, inter, limit, row_weight, got.data(), pool);
                            expect_bf16_outputs(got, want, kOneUlpRarely);
                        }
                }
}

TEST(RowwiseOps, RopeIsTheReferenceBitForBit) {
    Inputs in(13);
    for (int rope_dim : {64, 32, 6, 2})
        for (bool inverse : {false, true}) {
            const int64_t count = 5, stride = rope_dim + 9;
            std::vector<bf16> x = in.bf16s(count * stride, -8.0f, 8.0f);
            x[1] = float_to_bf16(kNaN);
            std::vector<float> c(rope_dim / 2), s(rope_dim / 2);
            for (int i = 0; i < rope_dim / 2; ++i) {
                const float phi = in.uniform(-100.0f, 100.0f);
                c[i] = std::cos(phi);
                s[i] = std::sin(phi);
            }
            std::vector<bf16> want = x;
            backend::ref::kernels().rope(want.data(), count, stride, rope_dim, c.data(), s.data(), inverse);
            for (const Kernels* table : simd_tables()) {
                SCOPED_TRACE(fmt::format("{} rope_dim {} inverse {}", isa_name(table->isa), rope_dim, inverse));
                Guarded<bf16> got(x.size());
                std::copy(x.begin(), x.end(), got.data());
                table->rope(got.data(), count, stride, rope_dim, c.data(), s.data(), inverse);
                ASSERT_TRUE(got.guards_intact());
                // the lanes past rope_dim of each vector (the nope part and the gap) stay as they were
                for (int64_t v = 0; v < count; ++v)
                    for (int64_t k = rope_dim; k < stride; ++k) ASSERT_EQ(got.data()[v * stride + k].bits, x[v * stride + k].bits);
                const int64_t total = static_cast<int64_t>(x.size());
                EXPECT_EQ(check_ulps(compare_bf16(want.data(), total, got.data(), total, 1, total), kExact), "");
            }
        }
}

TEST(RowwiseOps, PairPoolWithinOneUlp) {
    Inputs in(14);
    for (int dim : {512, 128, 21}) {
        std::vector<float> u0 = in.floats(dim, -3.0f, 3.0f), u1 = in.floats(dim, -3.0f, 3.0f);
        std::vector<float> g0 = in.floats(dim, -30.0f, 30.0f), g1 = in.floats(dim, -30.0f, 30.0f);
        g0[0] = g1[0];     // equal gates: weights 1/2 each
        g1[1] = -kInf;     // one token gated off
        g0[2] = kNaN;      // NaN gate
        std::vector<bf16> want(dim);
        backend::ref::kernels().pair_pool(u0.data(), g0.data(), u1.data(), g1.data(), dim, want.data());
        for (const Kernels* table : simd_tables()) {
            SCOPED_TRACE(fmt::format("{} dim {}", isa_name(table->isa), dim));
            Guarded<bf16> got(dim);
            table->pair_pool(u0.data(), g0.data(), u1.data(), g1.data(), dim, got.data());
            expect_bf16_outputs(got, want, kOneUlpRarely);
        }
    }
}

TEST(RowwiseOps, SinkhornWithinBudget) {
    Inputs in(15);
    for (int hc : {4, 2, 9})
        for (int64_t n : {1, 15, 16, 17, 100}) {
            const int mix = (2 + hc) * hc;
            std::vector<float> mixes = in.floats(n * mix, -3.0f, 3.0f), base = in.floats(mix, -1.0f, 1.0f);
            const float scale[3] = {0.7f, 1.3f, 2.1f};
            std::vector<float> want_pre(n * hc), want_post(n * hc), want_comb(n * hc * hc);
            ThreadPool one(1);
            backend::ref::kernels().hc_sinkhorn(mixes.data(), n, scale, base.data(), hc, 20, 1e-6f, want_pre.data(),
                                                want_post.data(), want_comb.data(), one);
            for (const Kernels* table : simd_tables())
                for (int threads : {1, 2, 3}) {
                    SCOPED_TRACE(fmt::format("{} threads {} hc {} n {}", isa_name(table->isa), threads, hc, n));
                    ThreadPool pool(threads);
                    Guarded<float> pre(n * hc), post(n * hc), comb(n * hc * hc);
                    table->hc_sinkhorn(mixes.data(), n, scale, base.data(), hc, 20, 1e-6f, pre.data(), post.data(),
                                       comb.data(), pool);
                    ASSERT_TRUE(pre.guards_intact() && post.guards_intact() && comb.guards_intact());
                    auto expect_close = [](const Guarded<float>& got, const std::vector<float>& want, const char* what) {
                        for (size_t i = 0; i < want.size(); ++i) {
                            ASSERT_FALSE(got.untouched(i)) << what << " " << i << " not written";
                            ASSERT_LE(std::fabs(got.data()[i] - want[i]), 4e-6f * std::fabs(want[i]))
                                << what << " " << i << ": ref " << want[i] << " got " << got.data()[i];
                        }
                    };
                    expect_close(pre, want_pre, "pre");
                    expect_close(post, want_post, "post");
                    expect_close(comb, want_comb, "comb");
                }
        }
}

TEST(RowwiseOps, TopkEntriesAreTheReferenceSelection) {
    Inputs in(16);
    for (int64_t width : {1, 5, 100, 1000, 5000, 70000})
        for (int coarse : {0, 1})  // coarse: scores on a grid of 8 values, so ties run across the k-th place
            for (int64_t k : {int64_t{1}, int64_t{7}, width / 3, width - 1, width}) {
                if (k < 1 || k > width) continue;
                std::vector<float> scores = in.floats(width, -50.0f, 50.0f);
                if (coarse)
                    for (auto& v : scores) v = std::round(v / 12.5f);
                const int64_t n_vis = width - width / 4;  // an invisible -inf tail, as the model writes
                for (int64_t j = n_vis; j < width; ++j) scores[j] = -kInf;
                if (width >= 10) {
                    scores[3] = kNaN;
                    scores[4] = -0.0f;
                    scores[5] = 0.0f;
                    scores[6] = kInf;
                }
                std::vector<int32_t> want(k);
                backend::ref::kernels().topk_entries(scores.data(), width, static_cast<int>(k), want.data());
                ASSERT_TRUE(std::is_sorted(want.begin(), want.end()));
                for (const Kernels* table : simd_tables()) {
                    SCOPED_TRACE(fmt::format("{} width {} k {} coarse {}", isa_name(table->isa), width, k, coarse));
                    Guarded<int32_t> got(k);
                    table->topk_entries(scores.data(), width, static_cast<int>(k), got.data());
                    ASSERT_TRUE(got.guards_intact());
                    for (int64_t e = 0; e < k; ++e) ASSERT_EQ(got.data()[e], want[e]) << "entry " << e;
                }
            }
}

TEST(RowwiseOps, TopkEntriesReferenceOrder) {
    // The reference's own rule, spelled out: larger first, NaN above +inf, -0 = +0, ties to the lower entry.
    const std::vector<float> scores = {1.0f, kNaN, 2.0f, -0.0f, 0.0f, 2.0f, kInf, -kInf};
    std::vector<int32_t> top(4);
    backend::ref::kernels().topk_entries(scores.data(), 8, 4, top.data());
    EXPECT_EQ(top, (std::vector<int32_t>{1, 2, 5, 6}));
    top.resize(6);
    backend::ref::kernels().topk_entries(scores.data(), 8, 6, top.data());
    EXPECT_EQ(top, (std::vector<int32_t>{0, 1, 2, 3, 5, 6}));  // -0 (entry 3) before +0 (entry 4): the lower entry
}

TEST(RowwiseOps, GatherFp8RowsIsTheReferenceBitForBit) {
    Inputs in(17);
    for (int dim : {1024, 32}) {
        const int64_t table_rows = 300;
        // every code in some row, scales over the whole e8m0 range (0 = 2^-127, 255 = NaN included)
        std::vector<uint8_t> codes = in.bytes(table_rows * dim);
        for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
        std::vector<uint8_t> scales = in.bytes(table_rows * dim / 32, 100, 150);
        scales[0] = 0;
        scales[1 % (dim / 32 + 1)] = 255;
        scales[2 % (table_rows * dim / 32)] = 254;
        scales[255 / 32] = 255;  // (dim 1024: the NaN codes' group, which then is the scale's NaN)
        std::vector<int64_t> rows = {0, 299, 5, 5, 0, 17, 123, 1};
        const int64_t count = static_cast<int64_t>(rows.size());
        ThreadPool one(1);
        std::vector<bf16> want(count * dim);
        backend::ref::kernels().gather_fp8_rows(codes.data(), scales.data(), dim, rows.data(), count, want.data(), one);
        for (const Kernels* table : simd_tables())
            for (int threads : {1, 2}) {
                SCOPED_TRACE(fmt::format("{} threads {} dim {}", isa_name(table->isa), threads, dim));
                ThreadPool pool(threads);
                Guarded<bf16> got(count * dim);
                table->gather_fp8_rows(codes.data(), scales.data(), dim, rows.data(), count, got.data(), pool);
                expect_bf16_outputs(got, want, kExact);
            }
    }
}

TEST(RowwiseOps, UnpackRecordsIsTheReferenceBitForBit) {
    Inputs in(23);
    struct Case {
        CacheRecord kind;
        int dim;
        size_t (*bytes)(int);
    };
    const Case cases[] = {{CacheRecord::kWindow, 512, window_record_bytes},
                          {CacheRecord::kWindow, 32, window_record_bytes},
                          {CacheRecord::kCompressed, 512, compressed_record_bytes},
                          {CacheRecord::kCompressed, 64, compressed_record_bytes},
                          {CacheRecord::kIndexKey, 128, index_key_record_bytes},
                          {CacheRecord::kIndexKey, 32, index_key_record_bytes}};
    for (const Case& c : cases) {
        const auto record_bytes = static_cast<int64_t>(c.bytes(c.dim));
        const int64_t pool_records = 300, count = 211;  // count x dim past the drivers' serial limit at dim >= 128
        std::vector<uint8_t> pool_bytes = in.bytes(pool_records * record_bytes);
        const int64_t code_bytes = c.kind == CacheRecord::kWindow ? c.dim : c.dim / 2;
        const int64_t scale_count = record_bytes - code_bytes;
        for (int64_t r = 0; r < pool_records; ++r) {
            uint8_t* scales = pool_bytes.data() + r * record_bytes + code_bytes;
            for (int64_t g = 0; g < scale_count; ++g) {
                // mostly ordinary scales; every e4m3 scale code (NaN, subnormals) in the compressed records, and
                // e8m0's 2^-127, 2^127 and NaN in the others
                if (c.kind == CacheRecord::kCompressed) {
                    scales[g] = static_cast<uint8_t>((r * scale_count + g) % 256);
                } else {
                    const uint8_t specials[] = {0, 255, 254, 1};
                    const int64_t at = r * scale_count + g;
                    scales[g] = at % 13 == 5 ? specials[at / 13 % 4] : static_cast<uint8_t>(100 + at % 50);
                }
            }
        }
        for (int v = 0; v < 256 && v < code_bytes; ++v) pool_bytes[v] = static_cast<uint8_t>(v);  // every code byte
        if (c.kind == CacheRecord::kWindow && c.dim >= 256) {  // the NaN codes' groups under a NaN / a tiny scale
            pool_bytes[code_bytes + 7] = 255;
            pool_bytes[code_bytes + 3] = 0;
        }
        // records in no particular order, some twice
        std::vector<const uint8_t*> records(static_cast<size_t>(count));
        for (int64_t r = 0; r < count; ++r) records[r] = pool_bytes.data() + (r * 37 % pool_records) * record_bytes;
        ThreadPool one(1);
        std::vector<bf16> want(count * c.dim);
        backend::ref::kernels().unpack_records(c.kind, records.data(), count, c.dim, want.data(), one);
        for (const Kernels* table : simd_tables())
            for (int threads : {1, 2}) {
                SCOPED_TRACE(fmt::format("{} threads {} kind {} dim {}", isa_name(table->isa), threads,
                                         static_cast<int>(c.kind), c.dim));
                ThreadPool pool(threads);
                Guarded<bf16> got(count * c.dim);
                table->unpack_records(c.kind, records.data(), count, c.dim, got.data(), pool);
                expect_bf16_outputs(got, want, kExact);
                for (int64_t i = 0; i < count * c.dim; ++i)
                    ASSERT_EQ(got.data()[i].bits, want[i].bits) << "record " << i / c.dim << " element " << i % c.dim;
            }
    }
}

}  // namespace
}  // namespace deepinfer::testing
