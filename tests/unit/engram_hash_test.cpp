// Engram hash constants of spec §5.5.1 recomputed from the algorithm (primes, offsets, numpy-generated
// multipliers), and the n-gram blocking rules.
#include <gtest/gtest.h>

#include "model/config.h"
#include "model/engram_hash.h"
#include "model/numpy_random.h"

namespace deepinfer::model {
namespace {

TEST(NumpyPcg64, MatchesSpecMultipliers) {
    // default_rng(10007 * layer_id).integers(0, bound, 4, int64) * 2 + 1 with bound for 99,092 classes.
    const int64_t bound = (INT64_MAX / 99092) / 2;
    EXPECT_EQ(bound, 46539438283891);
    auto check = [&](int layer, std::vector<int64_t> expected) {
        NumpyPcg64 rng(10007ull * layer);
        auto v = rng.integers(bound, 4);
        for (auto& x : v) x = x * 2 + 1;
        EXPECT_EQ(v, expected) << "layer " << layer;
    };
    check(1, {76632096046245, 4839876093313, 35959672319349, 73987337458391});
    check(14, {67716810739261, 51510806800915, 30921347202721, 82619226485591});
}

TEST(EngramLayout, ReleasedPrimesOffsetsAndRows) {
    ModelConfig c = ModelConfig::released();
    EngramLayout layout = make_engram_layout(c);
    ASSERT_EQ(layout.primes.size(), 2u);
    const std::vector<int64_t> layer1 = {16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133,
                                         16000183, 16000189, 16000207, 16000211, 16000253, 16000277, 16000289,
                                         16000307, 16000321, 16000339, 16000381, 16000393, 16000399, 16000403,
                                         16000409, 16000447, 16000463};
    EXPECT_EQ(layout.primes[0], layer1);
    EXPECT_EQ(layout.primes[1].front(), 16000477);
    EXPECT_EQ(layout.primes[1].back(), 16000889);
    EXPECT_EQ(layout.table_rows[0], 384006168);
    EXPECT_EQ(layout.table_rows[1], 384016682);
    EXPECT_EQ(layout.offsets[0][1], 16000057);
    EXPECT_EQ(layout.offsets[0][2], 32000136);
    EXPECT_EQ(layout.offsets[0][23], 368005705);
    EXPECT_EQ(layout.offsets[1][23], 368015793);
    EXPECT_EQ(layout.multipliers[0][0], 76632096046245);
}

TEST(EngramHash, BlocksAtSequenceStartAndDeadTokens) {
    ModelConfig c = ModelConfig::released();
    EngramLayout layout = make_engram_layout(c);
    const int32_t pad = 2;
    std::vector<int32_t> cids = {5, 7, 11, 13, kEngramDead, 17, 19};
    auto ids_at = [&](int64_t t) {
        std::vector<int64_t> out(layout.n_cols);
        engram_row_ids(layout, 0, t, pad, [&](int s) { return cids[t - s]; }, out.data());
        return out;
    };
    auto expected = [&](int64_t t, std::vector<int64_t> tokens) {  // tokens for shifts 0..3 after blocking
        std::vector<int64_t> out(layout.n_cols);
        int64_t rolling = tokens[0] * layout.multipliers[0][0];
        for (int s = 1; s < 4; ++s) {
            rolling ^= tokens[s] * layout.multipliers[0][s];
            for (int h = 0; h < 8; ++h) {
                int col = (s - 1) * 8 + h;
                out[col] = layout.offsets[0][col] + rolling % layout.primes[0][col];
            }
        }
        return out;
    };
    EXPECT_EQ(ids_at(0), expected(0, {5, pad, pad, pad}));
    EXPECT_EQ(ids_at(2), expected(2, {11, 7, 5, pad}));
    EXPECT_EQ(ids_at(3), expected(3, {13, 11, 7, 5}));
    EXPECT_EQ(ids_at(5), expected(5, {17, pad, pad, pad}));  // the dead token cuts every longer n-gram
    EXPECT_EQ(ids_at(6), expected(6, {19, 17, pad, pad}));
    for (int64_t t = 0; t < 7; ++t) {
        if (t == 4) continue;
        auto ids = ids_at(t);
        for (int col = 0; col < layout.n_cols; ++col) {
            EXPECT_GE(ids[col], layout.offsets[0][col]);
            EXPECT_LT(ids[col], layout.offsets[0][col] + layout.primes[0][col]);
        }
    }
}

}  // namespace
}  // namespace deepinfer::model
