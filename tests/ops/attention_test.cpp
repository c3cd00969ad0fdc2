// Sparse sink attention (spec §4.7) and indexer scores (spec §5.3.5) of every SIMD table against the
// scalar reference. Budgets: attention outputs within 2 bf16 ulps of a row's largest |value| and NMSE
// <= 1e-5 (exp() and summation order differ); scores within 1 ulp, rarely different (AVX2 is exact:
// same dot order), NMSE <= 1e-6.
#include <gtest/gtest.h>

#include "backend/kernels.h"
#include "core/quant_records.h"
#include "op_harness.h"

namespace deepinfer::testing {
namespace {

using backend::Kernels;

struct AttnShape {
    int64_t m;
    int heads, dim, topk, n_kv;
    double invalid;  // fraction of -1 entries
};

void run_attn(const AttnShape& s, uint64_t seed) {
    Inputs in(seed);
    std::vector<bf16> q = in.bf16s(s.m * s.heads * s.dim, -3.0f, 3.0f), kv = in.bf16s(s.n_kv * s.dim, -2.0f, 2.0f);
    std::vector<int32_t> idx(s.m * s.topk);
    for (auto& j : idx) j = in.uniform(0.0f, 1.0f) < s.invalid ? -1 : in.uniform_int(0, s.n_kv - 1);
    std::vector<float> sink = in.floats(s.heads, -2.0f, 2.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.dim));
    const int64_t count = s.m * s.heads * s.dim;
    ThreadPool ref_pool(2);
    Guarded<bf16> ref(count);
    backend::ref::kernels().sparse_attn(q.data(), s.m, s.heads, s.dim, kv.data(), idx.data(), s.topk, sink.data(),
                                        scale, ref.data(), ref_pool);
    for (const Kernels* table : simd_tables())
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(fmt::format("{} threads={} m={} heads={} dim={} topk={} n_kv={} invalid={}",
                                     isa_name(table->isa), threads, s.m, s.heads, s.dim, s.topk, s.n_kv, s.invalid));
            ThreadPool pool(threads);
            Guarded<bf16> out(count);
            table->sparse_attn(q.data(), s.m, s.heads, s.dim, kv.data(), idx.data(), s.topk, sink.data(), scale,
                               out.data(), pool);
            EXPECT_TRUE(out.guards_intact());
            std::vector<double> a(count), b(count);
            int64_t bad = 0;
            for (int64_t r = 0; r < s.m * s.heads; ++r) {
                double row_max = 0;
                for (int d = 0; d < s.dim; ++d)
                    row_max = std::max(row_max, std::fabs(double(bf16_to_float(ref.data()[r * s.dim + d]))));
                const double tol = 2.0 * std::ldexp(row_max, -8);  // 2 bf16 ulps of the row's scale
                for (int d = 0; d < s.dim; ++d) {
                    const int64_t e = r * s.dim + d;
                    EXPECT_FALSE(out.untouched(e)) << "element " << e << " not written";
                    a[e] = bf16_to_float(ref.data()[e]);
                    b[e] = bf16_to_float(out.data()[e]);
                    if (!(std::fabs(a[e] - b[e]) <= tol) && bad++ < 5)
                        ADD_FAILURE() << "row " << r << " col " << d << ": ref " << a[e] << " got " << b[e];
                }
            }
            EXPECT_EQ(bad, 0);
            EXPECT_LE(nmse(a, b), 1e-5);
        }
}

TEST(SparseAttn, Shapes) {
    uint64_t seed = 600;
    for (const AttnShape& s : {AttnShape{1, 3, 32, 1, 10, 0.0}, AttnShape{2, 5, 64, 64, 100, 0.0},
                               AttnShape{2, 4, 96, 200, 50, 0.5},  // duplicates: fewer rows than indices
                               AttnShape{3, 7, 128, 65, 300, 0.2}, AttnShape{1, 2, 64, 64, 10, 1.0},  // no valid index
                               AttnShape{2, 3, 48, 30, 40, 0.1}})  // dim not a multiple of 32: reference path
        run_attn(s, seed++);
}

// Decode and a short prefill at the released sizes: 64 heads of 512, window + compressed top-k = 640.
TEST(SparseAttn, ReleasedShapes) {
    run_attn({1, 64, 512, 640, 2000, 0.05}, 1);
    run_attn({3, 64, 512, 130, 300, 0.3}, 2);
}

struct ScoreShape {
    int64_t m;
    int heads, dim;
    int64_t n, pad;
};

void run_scores(const ScoreShape& s, uint64_t seed) {
    Inputs in(seed);
    std::vector<bf16> q = in.bf16s(s.m * s.heads * s.dim, -2.0f, 2.0f), keys = in.bf16s(s.n * s.dim, -2.0f, 2.0f);
    std::vector<bf16> w(s.m * s.heads);
    for (auto& v : w) v = float_to_bf16(in.uniform(-1.0f, 1.0f) / 64.0f);
    const int64_t ldo = s.n + s.pad;
    ThreadPool ref_pool(2);
    Output2d<float> ref(s.m, s.n, ldo);
    backend::ref::kernels().index_scores(q.data(), s.m, s.heads, s.dim, keys.data(), s.n, w.data(), ref.data(), ldo,
                                         ref_pool);
    for (const Kernels* table : simd_tables())
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(fmt::format("{} threads={} m={} heads={} dim={} n={}", isa_name(table->isa), threads, s.m,
                                     s.heads, s.dim, s.n));
            ThreadPool pool(threads);
            Output2d<float> out(s.m, s.n, ldo);
            table->index_scores(q.data(), s.m, s.heads, s.dim, keys.data(), s.n, w.data(), out.data(), ldo, pool);
            EXPECT_EQ(out.integrity(), "");
            std::vector<bf16> rb(s.m * s.n), ob(s.m * s.n);
            std::vector<double> a, b;
            for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                    rb[i * s.n + j] = float_to_bf16(ref.data()[i * ldo + j]);
                    ob[i * s.n + j] = float_to_bf16(out.data()[i * ldo + j]);
                    a.push_back(ref.data()[i * ldo + j]);
                    b.push_back(out.data()[i * ldo + j]);
                    // scores are bf16 values stored as fp32
                    EXPECT_EQ(bf16_to_float(ob[i * s.n + j]), out.data()[i * ldo + j]);
                }
            const UlpBudget budget = table->isa == Isa::kAvx2 ? UlpBudget{0, 0.0} : UlpBudget{1, 0.01};
            EXPECT_EQ(check_ulps(compare_bf16(rb.data(), s.n, ob.data(), s.n, s.m, s.n), budget), "");
            EXPECT_LE(nmse(a, b), 1e-6);
        }
}

TEST(IndexScores, Shapes) {
    uint64_t seed = 700;
    for (const ScoreShape& s : {ScoreShape{1, 1, 32, 1, 0}, ScoreShape{2, 3, 64, 100, 3}, ScoreShape{3, 32, 128, 63, 0},
                                ScoreShape{4, 32, 128, 64, 1}, ScoreShape{5, 2, 96, 130, 0},
                                ScoreShape{2, 4, 48, 20, 0}})  // dim not a multiple of 32: reference path
        run_scores(s, seed++);
}

// 32 heads of 128 (spec §2.2): one decode query over many compressed entries, and a prefill chunk.
TEST(IndexScores, ReleasedShapes) {
    run_scores({1, 32, 128, 5000, 0}, 1);
    run_scores({16, 32, 128, 700, 5}, 2);
}

// ---- index_scores_fp4: the same scores from index-key records (spec §6.1), summed in integers by the SIMD tables.

// count index-key records of dim values: each group of 32 uniform values times 2^e, e drawn from [-spread, spread]
// (spread 0: the groups' scales within a factor 2 or so, where the reference's fp32 dot products are exact).
std::vector<uint8_t> index_records(Inputs& in, int64_t count, int dim, int spread) {
    const size_t bytes = index_key_record_bytes(dim);
    std::vector<uint8_t> out(static_cast<size_t>(count) * bytes);
    std::vector<float> row(dim);
    for (int64_t r = 0; r < count; ++r) {
        for (int g = 0; g < dim / 32; ++g) {
            const float scale = std::ldexp(1.0f, spread > 0 ? in.uniform_int(-spread, spread) : 0);
            for (int d = 32 * g; d < 32 * g + 32; ++d) row[d] = in.uniform(-2.0f, 2.0f) * scale;
        }
        pack_index_key_record(row.data(), dim, out.data() + r * bytes, nullptr);
    }
    return out;
}

struct Fp4ScoreShape {
    int64_t m;
    int heads, dim;
    int64_t n, pad;
    int spread;
    bool specials;  // NaN (255) and smallest (0) e8m0 scale codes in some queries and keys
};

void run_fp4_scores(const Fp4ScoreShape& s, const UlpBudget& budget, uint64_t seed) {
    Inputs in(seed);
    const size_t bytes = index_key_record_bytes(s.dim);
    std::vector<uint8_t> q = index_records(in, s.m * s.heads, s.dim, s.spread);
    std::vector<uint8_t> keys = index_records(in, s.n, s.dim, s.spread);
    if (s.specials) {
        const int groups = s.dim / 32;
        q[(s.m * s.heads - 1) * bytes + s.dim / 2 + groups - 1] = 255;
        q[s.dim / 2] = 0;
        for (int64_t j = 0; j < s.n; j += 7) keys[j * bytes + s.dim / 2 + j % groups] = j % 2 ? 0 : 255;
    }
    std::vector<const uint8_t*> key_rows(s.n);
    for (int64_t j = 0; j < s.n; ++j) key_rows[j] = keys.data() + j * bytes;
    std::vector<bf16> w(s.m * s.heads);
    for (auto& v : w) v = float_to_bf16(in.uniform(-1.0f, 1.0f) / 64.0f);
    const int64_t ldo = s.n + s.pad;
    ThreadPool ref_pool(2);
    Output2d<float> ref(s.m, s.n, ldo);
    backend::ref::kernels().index_scores_fp4(q.data(), s.m, s.heads, s.dim, key_rows.data(), s.n, w.data(), ref.data(),
                                             ldo, ref_pool);
    for (const Kernels* table : simd_tables())
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(fmt::format("{} threads={} m={} heads={} dim={} n={} spread={}", isa_name(table->isa), threads,
                                     s.m, s.heads, s.dim, s.n, s.spread));
            ThreadPool pool(threads);
            Output2d<float> out(s.m, s.n, ldo);
            table->index_scores_fp4(q.data(), s.m, s.heads, s.dim, key_rows.data(), s.n, w.data(), out.data(), ldo,
                                    pool);
            EXPECT_EQ(out.integrity(), "");
            std::vector<bf16> rb(s.m * s.n), ob(s.m * s.n);
            for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                    rb[i * s.n + j] = float_to_bf16(ref.data()[i * ldo + j]);
                    ob[i * s.n + j] = float_to_bf16(out.data()[i * ldo + j]);
                    const float v = out.data()[i * ldo + j];
                    EXPECT_TRUE(std::isnan(v) || bf16_to_float(ob[i * s.n + j]) == v) << v;  // bf16 values
                }
            EXPECT_EQ(check_ulps(compare_bf16(rb.data(), s.n, ob.data(), s.n, s.m, s.n), budget), "");
            // A key's scores do not depend on the keys scored with it (the candidates-only scoring relies on it):
            // the keys from the 5th on, alone, give the same bits.
            if (s.n > 5) {
                Output2d<float> part(s.m, s.n - 5, s.n - 5);
                table->index_scores_fp4(q.data(), s.m, s.heads, s.dim, key_rows.data() + 5, s.n - 5, w.data(),
                                        part.data(), s.n - 5, pool);
                for (int64_t i = 0; i < s.m; ++i)
                    for (int64_t j = 5; j < s.n; ++j)
                        ASSERT_EQ(float_to_bf16(part.data()[i * (s.n - 5) + j - 5]).bits,
                                  ob[i * s.n + j].bits) << "row " << i << " key " << j;
            }
        }
}

// Scales within about a factor 2: every fp32 dot product of the reference is exact, so the bits are the reference's.
TEST(IndexScoresFp4, ExactWhereTheReferenceIs) {
    uint64_t seed = 800;
    for (const Fp4ScoreShape& s :
         {Fp4ScoreShape{1, 1, 32, 1, 0, 0, false}, Fp4ScoreShape{2, 3, 64, 100, 3, 0, false},
          Fp4ScoreShape{3, 32, 128, 63, 0, 0, false}, Fp4ScoreShape{4, 32, 128, 64, 1, 0, false},
          Fp4ScoreShape{5, 2, 96, 130, 0, 0, false}, Fp4ScoreShape{2, 5, 160, 70, 2, 0, false},
          Fp4ScoreShape{1, 32, 128, 5000, 0, 0, false}, Fp4ScoreShape{16, 32, 128, 700, 5, 0, false},
          Fp4ScoreShape{3, 4, 128, 90, 0, 0, true}})
        run_fp4_scores(s, UlpBudget{0, 0.0}, seed++);
}

// Group scales 2^-20 .. 2^20 apart: the reference's fp32 sums over the dims round, in another order than the group
// sums', so a score may differ by an ulp.
TEST(IndexScoresFp4, WideScales) {
    run_fp4_scores({4, 32, 128, 300, 0, 20, false}, UlpBudget{1, 0.01}, 900);
    run_fp4_scores({2, 7, 64, 200, 1, 20, true}, UlpBudget{1, 0.01}, 901);
}

}  // namespace
}  // namespace deepinfer::testing
