// A backend-independent check of every dist::Comm collective with exact expected values, shared by the
// LocalComm unit tests and the MPI test binary (tests/mpi/dist_mpi_check.cpp). Inputs are small integers
// (or multiples of 1/16), so sums are exact in any order and any backend must reproduce them bit for bit.
#pragma once

#include <string>
#include <vector>

#include "dist/comm.h"

namespace deepinfer::testing {

// Runs every collective on `comm` (a collective: all ranks call it) and returns what went wrong on this
// rank, one line per mismatch or error; empty means every check passed. `checks` counts the comparisons.
// Stops at the first failed collective call, since the communicator is then broken.
std::vector<std::string> check_collectives(dist::Comm& comm, int* checks = nullptr);

// The per-element input of rank `rank` used by the reductions: a small integer, distinct across ranks.
float reduction_input(int rank, size_t i);

}  // namespace deepinfer::testing
