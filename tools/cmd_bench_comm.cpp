// `deepinfer bench-comm`: latency and bandwidth of every collective of dist::Comm over MPI, meant to be
// launched by mpirun (docs/PERFORMANCE.md "Collectives (MPI)"). Rank 0 prints a table or JSON.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dist/mpi_comm.h"
#include "tools/commands.h"

namespace deepinfer::cli {
namespace {

struct BenchCommArgs {
    size_t min_bytes = 1024;
    size_t max_bytes = size_t{64} << 20;
    size_t latency_bytes = 8;
    int64_t timeout_ms = 300'000;
    int lanes = 1;
    std::vector<std::string> ops;  // empty: every collective
    bool json = false;
};

// One collective as the benchmark runs it: `bytes` is the nccl-tests "size" (all_reduce and broadcast:
// the buffer; all_gather(_v): the output; reduce_scatter: the input; all_to_all: what each rank sends)
// and bus_factor turns algorithm bandwidth into bus bandwidth, the per-link rate comparable across ranks.
struct Collective {
    const char* name;
    std::function<double(int n)> bus_factor;
    std::function<Status(dist::Comm&, size_t bytes, std::vector<float>& a, std::vector<float>& b)> run;
};

double ring_factor(int n) { return n > 1 ? static_cast<double>(n - 1) / n : 0.0; }

// Uneven all-gather-v shares, as with uneven expert loads: rank r holds a share proportional to r + 1.
std::vector<size_t> uneven_shares(size_t total_floats, int n) {
    std::vector<size_t> shares(static_cast<size_t>(n));
    const size_t weight_sum = static_cast<size_t>(n) * static_cast<size_t>(n + 1) / 2;
    size_t given = 0;
    for (int r = 0; r < n; ++r) {
        shares[static_cast<size_t>(r)] = total_floats * static_cast<size_t>(r + 1) / weight_sum;
        given += shares[static_cast<size_t>(r)];
    }
    shares.back() += total_floats - given;
    for (auto& s : shares) s *= sizeof(float);
    return shares;
}

std::vector<Collective> collectives() {
    auto one = [](int n) { return n > 1 ? 1.0 : 0.0; };
    return {
        {"barrier", [](int) { return 0.0; }, [](dist::Comm& c, size_t, auto&, auto&) { return c.barrier(); }},
        {"broadcast", one,
         [](dist::Comm& c, size_t bytes, auto& a, auto&) { return c.broadcast(a.data(), bytes, 0); }},
        {"all_reduce_sum", [](int n) { return 2.0 * ring_factor(n); },
         [](dist::Comm& c, size_t bytes, auto& a, auto&) { return c.all_reduce_sum(a.data(), bytes / 4); }},
        {"all_gather", ring_factor,
         [](dist::Comm& c, size_t bytes, auto& a, auto& b) {
             return c.all_gather(a.data(), bytes / static_cast<size_t>(c.size()), b.data());
         }},
        {"all_gather_v", ring_factor,
         [](dist::Comm& c, size_t bytes, auto& a, auto& b) {
             const std::vector<size_t> shares = uneven_shares(bytes / 4, c.size());
             return c.all_gather_v(a.data(), shares, b.data());
         }},
        {"reduce_scatter_sum", ring_factor,
         [](dist::Comm& c, size_t bytes, auto& a, auto& b) {
             return c.reduce_scatter_sum(a.data(), b.data(), bytes / 4 / static_cast<size_t>(c.size()));
         }},
        {"all_to_all", ring_factor,
         [](dist::Comm& c, size_t bytes, auto& a, auto& b) {
             return c.all_to_all(a.data(), bytes / static_cast<size_t>(c.size()), b.data());
         }},
    };
}

struct Row {
    std::string op;
    size_t bytes = 0;
    int iters = 0;
    double time_us = 0;  // median over batches of the slowest rank's mean time per call
    double best_us = 0;  // the fastest batch
    double algbw_gbs = 0;
    double busbw_gbs = 0;
};

// Calls are timed in kBatches batches; the median batch is reported, because on a shared machine a
// single batch can be hit by another process and a mean over all calls would report that process.
constexpr int kBatches = 5;

// Enough calls for about 256 MiB of traffic, at least one per batch and at most 2000: the same count on
// every rank.
int calls_per_batch(size_t bytes) {
    const size_t target = size_t{256} << 20;
    return static_cast<int>(std::clamp<size_t>(target / std::max<size_t>(bytes, 1), kBatches, 2000)) / kBatches;
}

Expected<Row> measure(dist::Comm& comm, const Collective& op, size_t bytes, std::vector<float>& a,
                      std::vector<float>& b) {
    const int calls = calls_per_batch(bytes);
    for (int i = 0; i < std::min(calls, 3); ++i) DI_RETURN_IF_ERROR(op.run(comm, bytes, a, b));  // warm-up
    std::vector<double> mine(kBatches);  // this rank's mean microseconds per call, per batch
    for (double& batch_us : mine) {
        DI_RETURN_IF_ERROR(comm.barrier());
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) DI_RETURN_IF_ERROR(op.run(comm, bytes, a, b));
        batch_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
    }
    std::vector<double> all(mine.size() * static_cast<size_t>(comm.size()));
    DI_RETURN_IF_ERROR(comm.all_gather(mine.data(), mine.size() * sizeof(double), all.data()));
    std::vector<double> slowest(kBatches, 0.0);  // a collective is as fast as its slowest rank
    for (size_t i = 0; i < all.size(); ++i) slowest[i % kBatches] = std::max(slowest[i % kBatches], all[i]);
    std::sort(slowest.begin(), slowest.end());
    Row row;
    row.op = op.name;
    row.bytes = bytes;
    row.iters = calls * kBatches;
    row.time_us = slowest[kBatches / 2];
    row.best_us = slowest.front();
    row.algbw_gbs = static_cast<double>(bytes) / (row.time_us * 1e3);
    row.busbw_gbs = row.algbw_gbs * op.bus_factor(comm.size());
    return row;
}

// The 1-minute load average, so that a reader can tell a quiet machine's numbers from a busy one's.
std::string load_average() {
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (f == nullptr) return "unknown";
    char text[64] = {};
    const bool ok = std::fgets(text, sizeof(text), f) != nullptr;
    std::fclose(f);
    if (!ok) return "unknown";
    std::string s(text);
    return s.substr(0, s.find(' '));
}

std::string human_bytes(size_t bytes) {
    if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
    if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{} B", bytes);
}

Status run_bench(dist::Comm& comm, const BenchCommArgs& args, std::vector<Row>* rows) {
    // Each size must split evenly into fp32 shares of every rank.
    const size_t align = sizeof(float) * static_cast<size_t>(comm.size());
    auto round_up = [&](size_t bytes) { return (bytes + align - 1) / align * align; };
    // Zeros: all_reduce accumulates into `a` on every call, and sums of zeros never overflow or go subnormal.
    std::vector<float> a(round_up(args.max_bytes) / sizeof(float) + 1, 0.0f);
    std::vector<float> b(a.size(), 0.0f);
    for (const Collective& op : collectives()) {
        if (!args.ops.empty() && std::find(args.ops.begin(), args.ops.end(), op.name) == args.ops.end()) continue;
        std::vector<size_t> sizes = {round_up(args.latency_bytes)};
        if (std::strcmp(op.name, "barrier") != 0) {
            for (size_t s = args.min_bytes; s <= args.max_bytes; s *= 4) sizes.push_back(round_up(s));
        }
        for (size_t bytes : sizes) {
            DI_ASSIGN_OR_RETURN(Row row, measure(comm, op, bytes, a, b));
            rows->push_back(row);
        }
    }
    return Status::ok();
}

void print_rows(const dist::Comm& comm, const BenchCommArgs& args, const std::vector<Row>& rows,
                const std::string& load) {
    const std::string mode = args.timeout_ms > 0 ? fmt::format("non-blocking + {} ms timeout", args.timeout_ms)
                                                 : std::string("blocking (no timeout)");
    if (args.json) {
        fmt::print("{{\"backend\": \"{}\", \"ranks\": {}, \"mode\": \"{}\", \"mpi\": \"{}\", \"hardware_threads\": {}, "
                   "\"load_average\": {}, \"results\": [\n",
                   comm.backend_name(), comm.size(), mode, dist::mpi_library_version().substr(0, 40),
                   std::thread::hardware_concurrency(), load);
        for (size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            fmt::print("  {{\"op\": \"{}\", \"bytes\": {}, \"iters\": {}, \"time_us\": {:.3f}, \"best_us\": {:.3f}, "
                       "\"algbw_gbs\": {:.4f}, \"busbw_gbs\": {:.4f}}}{}\n",
                       r.op, r.bytes, r.iters, r.time_us, r.best_us, r.algbw_gbs, r.busbw_gbs,
                       i + 1 < rows.size() ? "," : "");
        }
        fmt::print("]}}\n");
        return;
    }
    fmt::print("# {} ranks, {}, {}, {} hardware threads, load average {}\n# {}\n", comm.size(),
               comm.backend_name(), mode, std::thread::hardware_concurrency(), load,
               dist::mpi_library_version().substr(0, 60));
    fmt::print("# time: median of {} batches of the slowest rank's mean per call; best: fastest batch\n", kBatches);
    fmt::print("{:<20} {:>10} {:>6} {:>12} {:>12} {:>12} {:>12}\n", "collective", "size", "calls", "time (us)",
               "best (us)", "algbw GB/s", "busbw GB/s");
    for (const Row& r : rows) {
        fmt::print("{:<20} {:>10} {:>6} {:>12.2f} {:>12.2f} {:>12.3f} {:>12.3f}\n", r.op, human_bytes(r.bytes),
                   r.iters, r.time_us, r.best_us, r.algbw_gbs, r.busbw_gbs);
    }
}

int bench_comm(const BenchCommArgs& args) {
    if (args.min_bytes == 0 || args.min_bytes > args.max_bytes) {
        fmt::print(stderr, "bench-comm: need 0 < --min-bytes <= --max-bytes\n");
        return 2;
    }
    for (const std::string& name : args.ops) {
        const auto known = collectives();
        if (std::none_of(known.begin(), known.end(), [&](const Collective& c) { return name == c.name; })) {
            fmt::print(stderr, "bench-comm: unknown collective '{}' in --ops\n", name);
            return 2;
        }
    }
    dist::MpiOptions options;
    options.timeout = std::chrono::milliseconds(args.timeout_ms);
    options.lane_size = args.lanes;
    Expected<std::unique_ptr<dist::Comm>> comm = dist::init_mpi_comm(nullptr, nullptr, options);
    if (!comm) {
        fmt::print(stderr, "bench-comm: {}\n", comm.status().to_string());
        return 1;
    }
    const std::string load = load_average();  // before the run, which adds its own load
    std::vector<Row> rows;
    const Status status = run_bench(**comm, args, &rows);
    if (!status.is_ok()) {
        fmt::print(stderr, "bench-comm: rank {}: {}\n", (*comm)->rank(), status.to_string());
        dist::abort_mpi(1);  // the peers may be inside a collective this rank will never join
    }
    if ((*comm)->rank() == 0) print_rows(**comm, args, rows, load);
    comm->reset();
    const Status finalized = dist::finalize_mpi();
    if (!finalized.is_ok()) {
        fmt::print(stderr, "bench-comm: {}\n", finalized.to_string());
        return 1;
    }
    return 0;
}

}  // namespace

Command make_bench_comm_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto args = std::make_shared<BenchCommArgs>();
        auto* sub = app.add_subcommand("bench-comm",
                                       "Latency and bandwidth of the dist::Comm collectives (launch with mpirun)");
        sub->add_option("--min-bytes", args->min_bytes, "Smallest bandwidth size (bytes; sizes grow by 4x)")
            ->capture_default_str();
        sub->add_option("--max-bytes", args->max_bytes, "Largest bandwidth size (bytes)")->capture_default_str();
        sub->add_option("--latency-bytes", args->latency_bytes, "Size of the latency row of each collective")
            ->capture_default_str();
        sub->add_option("--timeout-ms", args->timeout_ms,
                        "Per-collective timeout; 0 uses MPI's blocking collectives (no hang guard)")
            ->capture_default_str();
        sub->add_option("--lanes", args->lanes, "Two-level all-reduce over lanes of this many ranks (1: flat)")
            ->capture_default_str();
        sub->add_option("--ops", args->ops,
                        "Collectives to run (default all): barrier, broadcast, all_reduce_sum, all_gather, "
                        "all_gather_v, reduce_scatter_sum, all_to_all")
            ->delimiter(',');
        sub->add_flag("--json", args->json, "Print JSON instead of a table");
        sub->callback([args, exit_code] { *exit_code = bench_comm(*args); });
    }};
}

}  // namespace deepinfer::cli
