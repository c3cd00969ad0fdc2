// The split rules of src/model/parallel.h: the vocab-parallel LM head covers every vocabulary id exactly once
// (uneven vocabularies included), and the shared expert and the Engram projection are split only along whole
// 32-row scale blocks.
#include "model/parallel.h"

#include <gtest/gtest.h>

namespace deepinfer::model {
namespace {

TEST(ParallelPlan, HeadRowsTileTheVocabulary) {
    for (int64_t vocab : {int64_t{1024}, int64_t{129280}, int64_t{1001}, int64_t{7}})
        for (int tp : {1, 2, 3, 4, 8}) {
            int64_t next = 0;
            for (int r = 0; r < tp; ++r) {
                const auto [first, last] = head_rows(vocab, r, tp);
                EXPECT_EQ(first, next) << "vocab " << vocab << " tp " << tp << " rank " << r;
                EXPECT_GE(last, first);
                EXPECT_LE(last - first, vocab / tp + 1);
                next = last;
            }
            EXPECT_EQ(next, vocab) << "vocab " << vocab << " tp " << tp;
        }
}

TEST(ParallelPlan, SharedExpertSplitsOnlyAlongScaleBlocks) {
    EXPECT_FALSE(shard_shared_expert(2304, 1));
    EXPECT_TRUE(shard_shared_expert(2304, 2));   // 1152 rows per rank
    EXPECT_TRUE(shard_shared_expert(2304, 8));   // 288 = 9 blocks of 32
    EXPECT_FALSE(shard_shared_expert(2304, 16)); // 144 rows: not whole 32-row blocks
    EXPECT_TRUE(shard_shared_expert(128, 4));
    EXPECT_FALSE(shard_shared_expert(128, 8));
    EXPECT_FALSE(shard_shared_expert(96, 2));
    // Engram kv projection, released: 5120 x (4 + 1) = 25600 output rows
    EXPECT_TRUE(shard_rows_evenly(25600, 8));
    EXPECT_FALSE(shard_rows_evenly(25600, 1));
    EXPECT_FALSE(shard_rows_evenly(25600 + 32, 2));
}

}  // namespace
}  // namespace deepinfer::model
