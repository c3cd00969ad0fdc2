// Communicators and the model's ParallelPlan for a multi-rank replica (EngineConfig::tp / ep): TP groups of
// tp consecutive ranks, EP groups of ep consecutive ranks, over a world of max(tp, ep) ranks.
#pragma once

#include <memory>

#include "deepinfer/engine.h"
#include "dist/comm.h"
#include "model/parallel.h"

namespace deepinfer::engine {

struct ParallelSetup {
    std::unique_ptr<dist::Comm> tp_comm, ep_comm, host_comm;
    model::ParallelPlan plan;
};

// Collective over `world` (every rank calls it in the same order). world may be null for one rank.
Expected<ParallelSetup> make_parallel_setup(const EngineConfig& config, dist::Comm* world);

}  // namespace deepinfer::engine
