// TP / EP groups from the world communicator.
#include "engine/parallel_setup.h"

#include <algorithm>

#include "dist/host_shm.h"

namespace deepinfer::engine {

Expected<ParallelSetup> make_parallel_setup(const EngineConfig& c, dist::Comm* world) {
    ParallelSetup s;
    const int world_size = world ? world->size() : 1;
    if (c.tp < 1 || c.ep < 1 || c.dp < 1) return invalid_argument("--tp {} / --ep {} / --dp {}: must be >= 1", c.tp, c.ep, c.dp);
    if (c.dp > 1) {
        // DP attention: the world is the DP group and the EP group at once.
        if (c.tp != 1 || (c.ep != 1 && c.ep != c.dp) || world_size != c.dp)
            return invalid_argument("--dp {} runs attention data-parallel with the experts over the same ranks: it needs "
                                    "--tp 1, --ep 1 or {} and a world of {} ranks (this run has {})", c.dp, c.dp, c.dp,
                                    world_size);
        s.plan.dp_size = s.plan.ep_size = c.dp;
        s.plan.dp_rank = s.plan.ep_rank = world->rank();
        s.plan.dp = s.plan.ep = world;
        if (c.engram_shared_memory) {
            DI_ASSIGN_OR_RETURN(s.host_comm, dist::split_by_host(*world));
            s.plan.host = s.host_comm.get();
        }
        return s;
    }
    const int replica = std::max(c.tp, c.ep);
    if (replica != world_size || replica % c.tp != 0 || replica % c.ep != 0)
        return invalid_argument("--tp {} --ep {} need a world of max(tp, ep) = {} ranks with the smaller dividing it; "
                                "this run has {} rank(s) (mpirun -np)", c.tp, c.ep, replica, world_size);
    if (world_size == 1) return s;
    const int r = world->rank();
    if (c.tp > 1) {
        DI_ASSIGN_OR_RETURN(s.tp_comm, world->split(r / c.tp, r));
        s.plan.tp_size = c.tp;
        s.plan.tp_rank = s.tp_comm->rank();
        s.plan.tp = s.tp_comm.get();
    }
    if (c.ep > 1) {
        DI_ASSIGN_OR_RETURN(s.ep_comm, world->split(r / c.ep, r));
        s.plan.ep_size = c.ep;
        s.plan.ep_rank = s.ep_comm->rank();
        s.plan.ep = s.ep_comm.get();
    }
    if (c.engram_shared_memory) {
        DI_ASSIGN_OR_RETURN(s.host_comm, dist::split_by_host(*world));
        s.plan.host = s.host_comm.get();
    }
    return s;
}

}  // namespace deepinfer::engine
