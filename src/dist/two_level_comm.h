// Two-level ("lanes") all-reduce over any Comm: ranks are grouped into lanes of `lane_size` consecutive
// ranks (e.g. the ranks of one node or socket); an all-reduce becomes an intra-lane reduce-scatter, an
// inter-lane all-reduce of each rank's shard, and an intra-lane all-gather, so only 1/lane_size of the
// data crosses the slower inter-lane links. Every other collective goes to the flat communicator.
#pragma once

#include <cstddef>
#include <memory>

#include "dist/comm.h"

namespace deepinfer::dist {

struct TwoLevelOptions {
    int lane_size = 1;  // ranks per lane; must divide the group size
    // All-reduces of fewer bytes use the flat all-reduce: three latencies cost more than the bandwidth
    // saved. Every rank sees the same count, so every rank takes the same path.
    size_t min_bytes = 0;
};

// Collective over `flat` (it splits it twice). The result owns `flat`. Sums are bit-identical on every
// rank; they add in lane order (each lane's partial sum, then across lanes), which is not LocalComm's
// rank order, so results can differ from the flat all-reduce in the last bits.
Expected<std::unique_ptr<Comm>> make_two_level_comm(std::unique_ptr<Comm> flat, TwoLevelOptions options);

}  // namespace deepinfer::dist
