// TP / EP groups from the world communicator.
#include "engine/parallel_setup.h"

#include <algorithm>

#include "dist/host_shm.h"

namespace deepinfer::engine {

Expected<ParallelSetup> make_parallel_setup(const EngineConfig& c, dist::Comm* world) {
    ParallelSetup s;
    const int world_size = world ? world->size() : 1;
    if (c.tp < 1 || c.ep < 1) return invalid_argument("--tp {} / --ep {}: must be >= 1", c.tp, c.ep);
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
