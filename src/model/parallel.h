// How one model replica is split across ranks (spec §2.2 dims; the layout DeepInfer's Trainium port uses):
// tensor parallelism shards the attention heads (wq_b rows, attn_sink, wo_a groups, wo_b columns; one
// all-reduce of the output per layer) while q_a, kv, the compressor and the indexer stay replicated; expert
// parallelism partitions the routed experts (a partial MoE sum per rank, one all-reduce), the shared expert
// is replicated. Every rank of the TP/EP groups runs the same rows, so caches and sampling stay identical.
#pragma once

#include "dist/comm.h"

namespace deepinfer::model {

struct ParallelPlan {
    int tp_size = 1, tp_rank = 0;
    int ep_size = 1, ep_rank = 0;
    dist::Comm* tp = nullptr;  // the TP group; null when tp_size == 1
    dist::Comm* ep = nullptr;  // the EP group; null when ep_size == 1 (may be the same object as tp)
    // The ranks of this host: when set, the Engram tables are loaded once per host into shared memory.
    dist::Comm* host = nullptr;

    bool single() const { return tp_size == 1 && ep_size == 1; }
};

}  // namespace deepinfer::model
