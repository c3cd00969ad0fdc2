// The MPI entry points of a build without MPI (DEEPINFER_WITH_MPI=OFF): they exist, and say so.
#include <cstdlib>

#include "dist/mpi_comm.h"

namespace deepinfer::dist {

bool mpi_built() { return false; }

Expected<std::unique_ptr<Comm>> init_mpi_comm(int*, char***, const MpiOptions&) {
    return error(StatusCode::kUnsupported, "deepinfer was built without MPI (configure with -DDEEPINFER_WITH_MPI=ON)");
}

Status finalize_mpi() { return Status::ok(); }

void abort_mpi(int exit_code) { std::_Exit(exit_code); }

std::string mpi_library_version() { return "none (built without MPI)"; }

}  // namespace deepinfer::dist
