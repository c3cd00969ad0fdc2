// MpiComm: the Comm of a process launched by mpirun (Open MPI), and the process-wide MPI set-up. This
// header carries no MPI types, so code above dist builds without MPI flags; with DEEPINFER_WITH_MPI=OFF
// the same functions exist and report "built without MPI".
//
// Threads: MPI is initialised with MPI_THREAD_SERIALIZED. Only one thread calls MPI at a time (each Comm
// is used by one thread at a time, see dist/comm.h), but that thread need not be the one that called
// init_mpi_comm (the engine loop runs on its own thread); FUNNELED would forbid that. The kernels' worker
// threads never call MPI.
//
// What is guaranteed when a peer dies:
// - Launched by mpirun with its defaults, a rank that is killed or exits without finalize_mpi() makes
//   mpirun kill every other rank within about a second, and mpirun exits non-zero.
// - Where the runtime keeps the survivors alive (e.g. --mca orte_abort_on_non_zero_status 0, or a peer
//   that is alive but stopped calling), every collective fails with kIoError after the communicator's
//   timeout (MpiOptions::timeout, default 300 s): collectives are issued non-blocking (all-reduce and
//   reduce-scatter as our own point-to-point algorithms) and polled against a deadline, because MPI's
//   blocking collectives would wait forever. Errors MPI reports are returned as Status (the
//   communicators use MPI_ERRORS_RETURN), never raised as MPI's default fatal handler.
// - After any error the communicator is unusable (MPI cannot cancel a collective, and a pending one may
//   still write into the caller's buffers): call abort_mpi().
// - split() is guarded by a timed exchange of (color, key) before the blocking MPI_Comm_split, so a dead
//   peer fails the exchange instead of hanging the split. init and finalize are not guarded.
// - With timeout zero the blocking MPI collectives are used, with no guard (docs/PERFORMANCE.md,
//   "Collectives (MPI)", compares the two modes).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dist/comm.h"

namespace deepinfer::dist {

struct MpiOptions {
    // Per-collective timeout of the world communicator; zero uses MPI's blocking collectives (no guard).
    std::chrono::milliseconds timeout{300'000};
    // >1: wrap the world in a two-level all-reduce over lanes of this many consecutive ranks
    // (dist/two_level_comm.h); the lane size must divide the world size.
    int lane_size = 1;
    // Two-level all-reduces below this many bytes use the flat all-reduce.
    size_t lane_min_bytes = 0;
};

// True when this build has MPI (DEEPINFER_WITH_MPI=ON).
bool mpi_built();

// Initialise MPI once per process (MPI_Init_thread, MPI_THREAD_SERIALIZED; argc/argv may be null) and
// return a communicator over all ranks (a duplicate of MPI_COMM_WORLD). Later calls reuse the
// initialised MPI and return a new duplicate. A process started without mpirun is a world of one rank.
Expected<std::unique_ptr<Comm>> init_mpi_comm(int* argc, char*** argv, const MpiOptions& options = {});

// Finalise MPI, if init_mpi_comm initialised it. Destroy the MpiComms first (a Comm destroyed after this
// leaks its MPI handle harmlessly). A no-op without MPI.
Status finalize_mpi();

// End every rank of the job with `exit_code` (MPI_Abort). The way out after a communicator error; without
// MPI (or before init) it ends this process only.
[[noreturn]] void abort_mpi(int exit_code);

// The MPI library's version string ("Open MPI v4.1.4, ..."), or why there is none.
std::string mpi_library_version();

}  // namespace deepinfer::dist
