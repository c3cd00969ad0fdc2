// MPI set-up for the CLI subcommands that run the engine.
#include "tools/mpi_launch.h"

#include <fmt/format.h>

#include "core/env.h"
#include "dist/mpi_comm.h"

namespace deepinfer::cli {

int run_with_ranks(const EngineConfig& config, const std::function<int(dist::Comm* world)>& rank0) {
    if (env::mpi_launcher_world_size() <= 1 && config.tp == 1 && config.ep == 1) return rank0(nullptr);
    auto world = dist::init_mpi_comm(nullptr, nullptr);
    if (!world) {
        fmt::print(stderr, "error: {}\n", world.status().message());
        return 1;
    }
    int code = 0;
    if ((*world)->rank() == 0) {
        code = rank0(world->get());
    } else {
        Status s = run_engine_follower(config, **world);
        if (!s.is_ok()) {
            fmt::print(stderr, "error: rank {}: {}\n", (*world)->rank(), s.message());
            world->reset();
            dist::abort_mpi(1);
        }
    }
    world->reset();
    Status s = dist::finalize_mpi();
    if (!s.is_ok()) fmt::print(stderr, "warning: {}\n", s.message());
    return code;
}

}  // namespace deepinfer::cli
