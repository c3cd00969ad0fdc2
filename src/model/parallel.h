// How one model replica is split across ranks (spec §2.2 dims; the layout DeepInfer's Trainium port uses):
// tensor parallelism shards the attention heads (wq_b rows, attn_sink, wo_a groups, wo_b columns; one
// all-reduce of the output per layer) while q_a, kv, the compressor and the indexer stay replicated; expert
// parallelism partitions the routed experts (a partial MoE sum per rank, one all-reduce). TP also splits the
// shared expert (shard_shared_expert), the Engram projection's output rows and the LM head's vocabulary rows
// (one all-gather each). Every rank of the TP/EP groups runs the same rows, so caches and sampling stay
// identical.
#pragma once

#include <cstdint>
#include <utility>

#include "dist/comm.h"

namespace deepinfer::model {

struct ParallelPlan {
    int tp_size = 1, tp_rank = 0;
    int ep_size = 1, ep_rank = 0;
    dist::Comm* tp = nullptr;  // the TP group; null when tp_size == 1
    dist::Comm* ep = nullptr;  // the EP group; null when ep_size == 1 (may be the same object as tp)
    // DP attention: each rank runs its own rows (its own sequences and caches); the MoE gathers the rows of
    // every rank, each rank runs its experts (ep == dp) on all of them and gets back the sums of its rows.
    int dp_size = 1, dp_rank = 0;
    dist::Comm* dp = nullptr;
    // The ranks of this host: when set, the Engram tables are loaded once per host into shared memory.
    dist::Comm* host = nullptr;

    bool single() const { return tp_size == 1 && ep_size == 1 && dp_size == 1; }
};

// The shared expert is split over the TP group like a Megatron MLP (w1 / w3 rows, w2 columns: fp32 partial
// sums, one all-reduce, one bf16 rounding) when its intermediate size divides into 32-row blocks per rank
// (the fp8 32x32 scale grid); otherwise every rank keeps all of it. The Engram kv projection is split by output
// rows on the same condition (one all-gather; each output the same dot product as on one rank).
inline bool shard_rows_evenly(int64_t rows, int tp) { return tp > 1 && rows % (32 * tp) == 0; }
inline bool shard_shared_expert(int64_t intermediate, int tp) { return shard_rows_evenly(intermediate, tp); }

// Vocabulary rows [first, second) of the LM head that TP rank `rank` of `size` holds (vocab-parallel head).
inline std::pair<int64_t, int64_t> head_rows(int64_t vocab, int rank, int size) {
    return {vocab * rank / size, vocab * (rank + 1) / size};
}

}  // namespace deepinfer::model
