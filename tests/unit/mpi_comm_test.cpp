// The MPI entry points without mpirun: a build without MPI must say so through Status; a build with it
// must link the Open MPI the toolchain provides. The collectives themselves are tested under mpirun
// (tests/mpi/dist_mpi_check.cpp, label "mpi").
#include <gtest/gtest.h>

#include "dist/mpi_comm.h"

namespace deepinfer::dist {
namespace {

TEST(MpiComm, BuildWithoutMpiReportsItThroughStatus) {
    if (mpi_built()) GTEST_SKIP() << "built with MPI (DEEPINFER_WITH_MPI=ON)";
    Expected<std::unique_ptr<Comm>> comm = init_mpi_comm(nullptr, nullptr);
    ASSERT_FALSE(comm.has_value());
    EXPECT_EQ(comm.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(comm.status().message().find("built without MPI"), std::string::npos) << comm.status().message();
    EXPECT_TRUE(finalize_mpi().is_ok());
}

TEST(MpiComm, BuildWithMpiLinksOpenMpi) {
    if (!mpi_built()) GTEST_SKIP() << "built without MPI (DEEPINFER_WITH_MPI=OFF)";
    // MPI_Get_library_version may be called before MPI_Init (MPI 3.1 §8.1.1), so no MPI job is needed.
    EXPECT_NE(mpi_library_version().find("Open MPI"), std::string::npos) << mpi_library_version();
}

}  // namespace
}  // namespace deepinfer::dist
