// Multi-rank execution of one model replica (tensor / expert parallelism): rank 0 owns the scheduler and
// broadcasts every model call it makes as a plan (the rows, their positions and Engram history, the block
// tables of their sequences, draft requests, released sequences); every other rank replays the plan on its
// shard of the weights and its copy of the KV pools, so the collectives inside the model line up.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "dist/comm.h"
#include "model/model.h"

namespace deepinfer::runner {

// The KV pool geometry every rank must share (sent once, before the first plan).
struct PoolGeometry {
    int32_t block_tokens = 64;
    int32_t window_blocks = 0;
    int32_t compressed_blocks = 0;
};

// Rank 0 side: wraps the model calls of the engine.
class PlanBroadcaster {
   public:
    PlanBroadcaster(dist::Comm& world, model::Model& model, kv::KvPools& pools) : world_(world), model_(model), pools_(pools) {}

    Status send_geometry(const PoolGeometry& geometry);
    Status forward(const model::ForwardBatch& batch, model::ForwardOutput* out);
    // main_hidden_row: the row of the last forward's main_hidden the request points into.
    Status draft(const model::DraftRequest& request, int32_t main_hidden_row, model::DraftOutput* out);
    // Followers drop their state of this sequence with the next plan.
    void release(int64_t seq_id) { released_.push_back(seq_id); }
    Status shutdown();

   private:
    Status broadcast(std::vector<uint8_t>& message);

    dist::Comm& world_;
    model::Model& model_;
    kv::KvPools& pools_;
    std::vector<int64_t> released_;
};

// Ranks > 0: receive the geometry, build the pools, replay plans until shutdown.
Status follow_plans(dist::Comm& world, model::Model& model);

}  // namespace deepinfer::runner
