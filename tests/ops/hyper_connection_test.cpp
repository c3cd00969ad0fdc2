// The 4-copy stream collapse / expansion (spec §5.2, model.py Block.hc_pre / hc_post) of every kernel table
// (scalar, and each SIMD table this CPU runs) against their formulas written out per element, bit for bit:
// each output sums its terms in the reference's order (from 0, copy by copy) and rounds once to bf16. Widths that are
// and are not multiples of the column block, with NaN, infinities and signed zeros in the stream.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/kernels.h"
#include "core/numeric.h"
#include "core/thread_pool.h"
#include "op_harness.h"

namespace deepinfer {
namespace {

struct Row {
    std::vector<bf16> x, o;  // x [hc, dim], o [dim]
    float pre[4], post[4], comb[16];
};

Row make_row(int hc, int dim, uint64_t seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    Row r;
    r.x.resize(static_cast<size_t>(hc) * dim);
    r.o.resize(static_cast<size_t>(dim));
    for (auto& v : r.x) v = float_to_bf16(normal(rng));
    for (auto& v : r.o) v = float_to_bf16(normal(rng));
    if (dim >= 8) {  // a NaN, an infinity and signed zeros in copies 0 and 1
        r.x[3] = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
        r.x[dim + 5] = float_to_bf16(-std::numeric_limits<float>::infinity());
        r.x[2 * dim - 1] = bf16{0x8000};
        r.o[1] = bf16{0x8000};
    }
    for (int c = 0; c < hc; ++c) r.pre[c] = normal(rng), r.post[c] = normal(rng);
    for (int c = 0; c < hc * hc; ++c) r.comb[c] = normal(rng);
    return r;
}

// A row whose sums depend on their order: weights 1, column 0 = (2^24, 1, -2^24, 1) over the copies (in copy
// order 1, in reverse order 2), column 1 all -0 (a sum started at +0 stays +0).
Row ordered_row(int hc, int dim) {
    Row r = make_row(hc, dim, 7);
    for (int c = 0; c < hc; ++c) r.pre[c] = 1.0f, r.post[c] = 1.0f;
    for (int c = 0; c < hc * hc; ++c) r.comb[c] = 1.0f;
    const float col0[4] = {16777216.0f, 1.0f, -16777216.0f, 1.0f};
    for (int c = 0; c < hc; ++c) {
        r.x[c * dim + 0] = float_to_bf16(col0[c]);
        if (dim > 1) r.x[c * dim + 1] = bf16{0x8000};
    }
    r.o[0] = bf16{0x8000};
    if (dim > 1) r.o[1] = bf16{0x8000};
    return r;
}

TEST(HyperConnection, CollapseAndExpandFollowTheirFormulas) {
    const int hc = 4;
    std::vector<const backend::Kernels*> tables = testing::simd_tables();
    tables.insert(tables.begin(), &backend::ref::kernels());
    for (int dim : {5120, 256, 100, 300, 1}) {
        // Three rows in one call: random, order-sensitive, random.
        const Row rows[3] = {make_row(hc, dim, static_cast<uint64_t>(dim)), ordered_row(hc, dim),
                             make_row(hc, dim, static_cast<uint64_t>(dim) + 1)};
        const int64_t n = 3;
        std::vector<bf16> x, o;
        std::vector<float> pre, post, comb;
        for (const Row& r : rows) {
            x.insert(x.end(), r.x.begin(), r.x.end());
            o.insert(o.end(), r.o.begin(), r.o.end());
            pre.insert(pre.end(), r.pre, r.pre + hc);
            post.insert(post.end(), r.post, r.post + hc);
            comb.insert(comb.end(), r.comb, r.comb + hc * hc);
        }
        for (const backend::Kernels* table : tables)
            for (int threads : {1, 2}) {
                SCOPED_TRACE(fmt::format("{} threads {} dim {}", isa_name(table->isa), threads, dim));
                ThreadPool pool(threads);
                testing::Guarded<bf16> y(n * dim), out(n * hc * dim);
                table->hc_collapse(x.data(), n, pre.data(), hc, dim, y.data(), pool);
                table->hc_expand(o.data(), x.data(), n, post.data(), comb.data(), hc, dim, out.data(), pool);
                ASSERT_TRUE(y.guards_intact());
                ASSERT_TRUE(out.guards_intact());
                for (int64_t i = 0; i < n; ++i) {
                    const Row& r = rows[i];
                    for (int k = 0; k < dim; ++k) {
                        float sum = 0.0f;
                        for (int c = 0; c < hc; ++c) sum += r.pre[c] * bf16_to_float(r.x[c * dim + k]);
                        ASSERT_EQ(y.data()[i * dim + k].bits, float_to_bf16(sum).bits)
                            << "collapse row " << i << " column " << k;
                    }
                    for (int j = 0; j < hc; ++j)
                        for (int k = 0; k < dim; ++k) {
                            float mixed = 0.0f;
                            for (int c = 0; c < hc; ++c) mixed += r.comb[c * hc + j] * bf16_to_float(r.x[c * dim + k]);
                            const float want = r.post[j] * bf16_to_float(r.o[k]) + mixed;
                            ASSERT_EQ(out.data()[(i * hc + j) * dim + k].bits, float_to_bf16(want).bits)
                                << "expand row " << i << " copy " << j << " column " << k;
                        }
                }
            }
    }
}

}  // namespace
}  // namespace deepinfer
