// LocalComm: N ranks as threads of one process, for tests of everything above dist without MPI. Same
// contract as every Comm (dist/comm.h), plus: sums add in rank order (rank 0 first), so tests can demand
// exact results; mismatched calls are detected and named; a rank whose Comm is destroyed counts as dead.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "dist/comm.h"

namespace deepinfer::dist {

namespace detail {
class LocalGroup;
}

struct LocalWorldOptions {
    // Per-collective timeout of every Comm handed out (Comm::set_timeout changes one of them).
    std::chrono::milliseconds timeout{60'000};
};

// Owns the group state of `size` ranks and hands out one Comm per rank, each to be used by one thread.
class LocalWorld {
   public:
    explicit LocalWorld(int size, LocalWorldOptions options = {});
    ~LocalWorld();

    int size() const { return size_; }
    // The communicator of `rank`, handed out once. The world may be destroyed before the comms.
    std::unique_ptr<Comm> take(int rank);

   private:
    int size_;
    LocalWorldOptions options_;
    std::shared_ptr<detail::LocalGroup> group_;
    std::vector<bool> taken_;
};

// Run fn on `size` threads, one per rank of a fresh LocalWorld, and return each rank's Status. An exception
// escaping fn becomes that rank's kInternal Status (it must not cross the thread boundary), and the rank's
// Comm is destroyed on return, so peers still waiting on it fail instead of hanging.
std::vector<Status> run_local_ranks(int size, const std::function<Status(Comm&)>& fn, LocalWorldOptions options = {});

}  // namespace deepinfer::dist
