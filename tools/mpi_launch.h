// Multi-rank runs of the CLI: when mpirun started this process, set up MPI; rank 0 runs the engine with
// the world communicator, the other ranks follow its plans (run_engine_follower) and exit.
#pragma once

#include <functional>
#include <memory>

#include "deepinfer/engine.h"
#include "dist/comm.h"

namespace deepinfer::cli {

// Runs `rank0(world)` on rank 0 (world is null for a single-process run) and the follower loop elsewhere;
// returns the process exit code.
int run_with_ranks(const EngineConfig& config, const std::function<int(dist::Comm* world)>& rank0);

}  // namespace deepinfer::cli
