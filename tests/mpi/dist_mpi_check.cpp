// MPI test binary, launched by mpirun from ctest (tests/CMakeLists.txt, label "mpi"). Default mode: every
// collective of the shared exact suite (support/comm_checks) on the world communicator with the timeout
// guard, again with blocking MPI, on a sub-group, and through the two-level all-reduce; exits non-zero on
// any mismatch. Failure mode (--die-rank): one rank dies or hangs in the middle of a loop of all-reduces
// and the others must report an error and end the job instead of hanging.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "dist/mpi_comm.h"
#include "dist/two_level_comm.h"
#include "support/comm_checks.h"

namespace {

using namespace deepinfer;
using namespace std::chrono_literals;

struct Args {
    int die_rank = -1;
    int die_at = 20;
    std::string die_how = "kill";  // kill (SIGKILL), exit (_exit(7)), hang (stop calling)
    int64_t timeout_ms = 60'000;
};

bool parse(int argc, char** argv, Args* args) {
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) return false;
        const std::string value = argv[++i];
        if (flag == "--die-rank") args->die_rank = std::stoi(value);
        else if (flag == "--die-at") args->die_at = std::stoi(value);
        else if (flag == "--die-how") args->die_how = value;
        else if (flag == "--timeout-ms") args->timeout_ms = std::stoll(value);
        else return false;
    }
    return args->die_how == "kill" || args->die_how == "exit" || args->die_how == "hang";
}

// Returns the number of problems found on this rank.
int run_suite(dist::Comm& comm, const std::string& label) {
    int checks = 0;
    const std::vector<std::string> problems = testing::check_collectives(comm, &checks);
    for (const auto& p : problems) fmt::print(stderr, "rank {}: {}: {}\n", comm.rank(), label, p);
    if (comm.rank() == 0 && problems.empty()) {
        fmt::print("{}: {} ranks ({}): {} checks passed\n", label, comm.size(), comm.backend_name(), checks);
    }
    return static_cast<int>(problems.size());
}

int check_everything(std::unique_ptr<dist::Comm> world) {
    int problems = run_suite(*world, "guarded");

    const auto guarded = world->timeout();
    world->set_timeout(0ms);
    if (problems == 0) problems += run_suite(*world, "blocking");
    world->set_timeout(guarded);

    // A sub-group in reverse order, so that sub-group ranks differ from world ranks.
    if (problems == 0 && world->size() >= 2) {
        Expected<std::unique_ptr<dist::Comm>> reversed = world->split(0, -world->rank());
        if (!reversed) {
            fmt::print(stderr, "rank {}: split: {}\n", world->rank(), reversed.status().to_string());
            return 1;
        }
        problems += run_suite(**reversed, "reversed sub-group");
    }
    if (problems == 0 && world->size() % 2 == 0 && world->size() >= 4) {
        Expected<std::unique_ptr<dist::Comm>> flat = world->split(0, world->rank());
        if (!flat) {
            fmt::print(stderr, "rank {}: split: {}\n", world->rank(), flat.status().to_string());
            return 1;
        }
        Expected<std::unique_ptr<dist::Comm>> lanes = dist::make_two_level_comm(std::move(*flat), {2, 0});
        if (!lanes) {
            fmt::print(stderr, "rank {}: two-level: {}\n", world->rank(), lanes.status().to_string());
            return 1;
        }
        problems += run_suite(**lanes, "two-level");
    }
    return problems;
}

[[noreturn]] void die(const std::string& how) {
    std::fflush(stdout);
    if (how == "kill") std::raise(SIGKILL);
    if (how == "exit") _exit(7);
    for (;;) std::this_thread::sleep_for(1h);  // hang: alive, but never calls again
}

int run_until_death(dist::Comm& comm, const Args& args) {
    std::vector<float> data(1024);
    for (int it = 0; it < args.die_at + 50; ++it) {
        if (comm.rank() == args.die_rank && it == args.die_at) die(args.die_how);
        for (size_t i = 0; i < data.size(); ++i) data[i] = testing::reduction_input(comm.rank(), i);
        const Status status = comm.all_reduce_sum(data.data(), data.size());
        if (!status.is_ok()) {
            fmt::print(stderr, "rank {}: iteration {}: {}\n", comm.rank(), it, status.to_string());
            return 3;
        }
    }
    fmt::print(stderr, "rank {}: finished every iteration although rank {} died at {}\n", comm.rank(), args.die_rank,
               args.die_at);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    if (!parse(argc, argv, &args)) {
        fmt::print(stderr,
                   "usage: dist_mpi_check [--timeout-ms T] [--die-rank R --die-at I --die-how kill|exit|hang]\n");
        return 2;
    }
    dist::MpiOptions options;
    options.timeout = std::chrono::milliseconds(args.timeout_ms);
    Expected<std::unique_ptr<dist::Comm>> world = dist::init_mpi_comm(&argc, &argv, options);
    if (!world) {
        fmt::print(stderr, "init_mpi_comm: {}\n", world.status().to_string());
        return 1;
    }
    const int rank = (*world)->rank();
    const int code = args.die_rank >= 0 ? run_until_death(**world, args) : check_everything(std::move(*world));
    // A failing rank cannot finalise safely (its peers may be inside a collective it will never join).
    if (code != 0) dist::abort_mpi(code > 255 ? 1 : code);
    world->reset();
    const Status finalized = dist::finalize_mpi();
    if (!finalized.is_ok()) {
        fmt::print(stderr, "rank {}: {}\n", rank, finalized.to_string());
        return 1;
    }
    return 0;
}
