// `deepinfer bench-decode`: decode-step time per block against its memory roofline (bytes the block must
// read / the read bandwidth measured in the same run), on any checkpoint (e.g. `make-tiny --preset release`:
// the released dimensions with two layers). Under mpirun with --tp / --ep, every rank runs the same steps on
// its shard and rank 0 reports.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/cpu/machine_probe.h"
#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "dist/mpi_comm.h"
#include "engine/parallel_setup.h"
#include "model/model.h"
#include "model/roofline.h"
#include "core/thread_profile.h"
#include "ops/op_profile.h"
#include "tiny/default_model.h"
#include "tools/commands.h"
#include "core/env.h"

namespace deepinfer::cli {
namespace {

struct Options {
    EngineConfig engine;
    int64_t context = 512;
    int batch = 1, steps = 8, rounds = 5;
    bool json = false, op_profile = false, thread_profile = false;
};

// Read bandwidth of all threads over `buffer` (far larger than the caches, every page written), with the
// streaming read probe of bench-ops (the best ISA's vector loads); median of 3 passes, GB/s.
double measure_read_bandwidth(const AlignedBuffer& buffer) {
    const Isa isa = backend::cpu::isa_supported(Isa::kAvx512) ? Isa::kAvx512 : Isa::kAvx2;
    return backend::cpu::median_of_3([&] {
        return backend::cpu::measure_read_gbps(isa, buffer.data(), buffer.size() / 256 * 256, ThreadPool::global());
    });
}

// One round of timed decode steps with the read bandwidth measured just before and after it.
struct Round {
    double bandwidth = 0;  // GB/s, the higher of before / after (the stricter roofline)
    double step_seconds = 0;
    model::ForwardProfile profile;
    std::vector<ops::OpStat> ops;  // --op-profile: the round's linears
    ThreadProfile threads;         // --thread-profile: the round's calls of the thread pool
    double layers_seconds = 0, layers_roofline = 0;
};

// The arithmetic peaks a linear's kernels run against (backend::cpu::measure_table_peak_gflops, bench-ops' policy).
struct Peaks {
    double fp32_gflops = 0, kernels_gflops = 0;
    bool kernels_on_fp32 = true;  // the table's kernels multiply in fp32 (AVX2): one peak
    const char* kernels_unit = "fp32 FMA";
};
Peaks measure_peaks() {
    ThreadPool& pool = ThreadPool::global();
    const Isa table = active_isa();
    auto peak = [&](bool fp32_math) {
        return backend::cpu::median_of_3(
            [&] { return backend::cpu::measure_table_peak_gflops(table, fp32_math, pool); });
    };
    Peaks p;
    p.fp32_gflops = peak(true);
    if (table == Isa::kAvx512) {
        p.kernels_gflops = peak(false);
        p.kernels_unit = backend::cpu::tile_peak_available() ? "AMX tile" : "bf16 dot";
        p.kernels_on_fp32 = false;
    } else {
        p.kernels_gflops = p.fp32_gflops;
    }
    return p;
}

// The median round's linears (ops::OpTimer): per step, each kind and shape's time, bytes and read rate against
// the round's bandwidth, flop rate against the peak of its math, and time against its own roofline -- the longer
// of reading its weights at the bandwidth and doing its flops at the peak (batched steps are compute-bound where
// n x 2 flops per weight byte pass peak / bandwidth). The rest of the layers' time is everything else (attention,
// norms, mHC, routing).
// Returns the same per linear as JSON rows (per step: seconds, bytes, flops, roofline_seconds).
nlohmann::json print_op_profile(const Round& round, const Peaks& peaks, int steps, double layers_seconds) {
    const std::string peak_text =
        peaks.kernels_on_fp32
            ? fmt::format("{:.1f} GFLOP/s of fp32 FMAs", peaks.fp32_gflops)
            : fmt::format("{:.1f} GFLOP/s of {}, fp32 math {:.1f} of FMAs", peaks.kernels_gflops, peaks.kernels_unit,
                          peaks.fp32_gflops);
    fmt::print("\nlinears of the median round, per step (frac: GB/s / read bandwidth {:.1f} GB/s; %peak: GFLOP/s / the "
               "peak of the kernels' math, {}, which MXFP4 kernels on integer dot products can pass; x roof: time / "
               "the longer of bytes at the bandwidth and flops at that peak)\n",
               round.bandwidth, peak_text);
    fmt::print("{:<44} {:>6} {:>9} {:>9} {:>9} {:>8} {:>6} {:>8} {:>6} {:>7}\n",
               "linear (kind, rows x cols, activation rows)", "calls", "ms", "us/call", "MB", "GB/s", "frac", "GFLOP/s",
               "%peak", "x roof");
    double seconds = 0, bytes = 0, roofline = 0;
    nlohmann::json rows = nlohmann::json::array();
    for (const ops::OpStat& s : round.ops) {
        const double t = s.seconds / steps, b = s.bytes / steps, f = s.flops / steps, gbs = b / t / 1e9;
        const double peak = s.fp32_math ? peaks.fp32_gflops : peaks.kernels_gflops;
        const double roof = std::max(b / (round.bandwidth * 1e9), f / (peak * 1e9));
        seconds += t;
        bytes += b;
        roofline += roof;
        fmt::print("{:<44} {:>6.1f} {:>9.3f} {:>9.1f} {:>9.2f} {:>8.1f} {:>6.2f} {:>8.1f} {:>5.0f}% {:>7.2f}\n", s.name,
                   static_cast<double>(s.calls) / steps, t * 1e3, s.seconds / s.calls * 1e6, b / 1e6, gbs,
                   gbs / round.bandwidth, f / t / 1e9, 100.0 * f / t / 1e9 / peak, t / roof);
        rows.push_back({{"linear", s.name}, {"calls", static_cast<double>(s.calls) / steps}, {"seconds", t},
                        {"bytes", b}, {"flops", f}, {"fp32_math", s.fp32_math}, {"peak_gflops", peak},
                        {"roofline_seconds", roof}});
    }
    fmt::print("linears (head included): {:.3f} ms per step, {:.2f} MB, {:.1f} GB/s ({:.2f} of the bandwidth), {:.2f}x "
               "their rooflines ({:.3f} ms); the layers' other work: {:.3f} ms\n",
               seconds * 1e3, bytes / 1e6, bytes / seconds / 1e9, bytes / seconds / 1e9 / round.bandwidth,
               seconds / roofline, roofline * 1e3,
               (layers_seconds + round.profile.head_seconds / steps - seconds) * 1e3);
    return rows;
}

// The median round's calls of the thread pool, per step: how much of the step ran inside them (the rest is the model's
// thread alone) and how fully the threads worked there.
void print_thread_profile(const Round& round, int steps) {
    const ThreadProfile& p = round.threads;
    const double inside = p.wall_s / steps, step = round.step_seconds;
    const double thread_wall = p.wall_s * std::max(p.threads, 1);
    fmt::print("\nthread pool of the median round, per step: {:.0f} calls ({:.0f} chunks) on {} threads, {:.3f} ms "
               "inside them of the step's {:.3f} ms ({:.0f}%; the rest on the model's thread alone); inside them the "
               "threads busy {:.0f}% (mean), the busiest {:.0f}%; shared activation preparation {:.3f} ms\n",
               static_cast<double>(p.calls) / steps, static_cast<double>(p.chunks) / steps, p.threads, inside * 1e3,
               step * 1e3, 100.0 * inside / step, thread_wall > 0 ? 100.0 * p.busy_s / thread_wall : 0.0,
               p.wall_s > 0 ? 100.0 * p.busiest_s / p.wall_s : 0.0, p.shared_acts_s / steps * 1e3);
}

int run(Options& o) {
    std::unique_ptr<dist::Comm> world;
    if (env::mpi_launcher_world_size() > 1) {
        auto w = dist::init_mpi_comm(nullptr, nullptr);
        if (!w) {
            fmt::print(stderr, "error: {}\n", w.status().message());
            return 1;
        }
        world = std::move(*w);
    }
    const bool rank0 = !world || world->rank() == 0;
    ThreadPool::set_global_threads(o.engine.threads);
    auto fail = [&](const Status& s) {
        fmt::print(stderr, "error: {}\n", s.message());
        if (world) dist::abort_mpi(1);
        return 1;
    };
    auto dir = tiny::resolve_model_dir(o.engine.model_dir);
    if (!dir) return fail(dir.status());
    auto setup = engine::make_parallel_setup(o.engine, world.get());
    if (!setup) return fail(setup.status());
    auto loaded = model::Model::load(*dir, rank0, setup->plan);
    if (!loaded) return fail(loaded.status());
    model::Model& m = **loaded;
    const model::ModelConfig& c = m.config();
    AlignedBuffer probe;
    if (rank0) {
        probe.allocate(size_t{1} << 30);
        std::memset(probe.data(), 0x5a, probe.size());  // a never-written page would read the shared zero page
    }
    const int64_t decode_steps = static_cast<int64_t>(o.steps) * o.rounds;

    const int T = 64;
    const int32_t blocks = static_cast<int32_t>(o.batch * ((o.context + decode_steps + T) / T + 2));
    kv::KvPools pools(model::make_cache_layout(c, T), blocks, blocks);
    std::vector<std::unique_ptr<kv::SequenceCache>> caches;
    std::vector<std::vector<int32_t>> tokens(o.batch);
    std::mt19937_64 rng(1);
    for (int b = 0; b < o.batch; ++b) {
        caches.push_back(std::make_unique<kv::SequenceCache>(pools.layout));
        caches.back()->ensure_blocks(pools, o.context + decode_steps + 1);
        for (int64_t i = 0; i < o.context; ++i) tokens[b].push_back(static_cast<int32_t>(3 + rng() % (c.vocab_size - 3)));
    }
    auto chunk_of = [&](int b, int64_t start, int64_t n) {
        model::SeqChunk chunk;
        chunk.seq_id = b;
        chunk.cache = caches[b].get();
        chunk.start_pos = start;
        chunk.n_rows = static_cast<int32_t>(n);
        chunk.history.assign(tokens[b].begin() + std::max<int64_t>(0, start - 3), tokens[b].begin() + start);
        return chunk;
    };
    // Prefill every sequence in chunks of 512 (not timed).
    for (int b = 0; b < o.batch; ++b)
        for (int64_t s = 0; s < o.context; s += 512) {
            const int64_t n = std::min<int64_t>(512, o.context - s);
            model::ForwardBatch batch;
            batch.tokens.assign(tokens[b].begin() + s, tokens[b].begin() + s + n);
            batch.seqs.push_back(chunk_of(b, s, n));
            batch.logit_rows = {static_cast<int32_t>(n - 1)};
            model::ForwardOutput out;
            Status st = m.forward(pools, batch, &out);
            if (!st.is_ok()) return fail(st);
            if (rank0) fmt::print(stderr, "\rbench-decode: prefill {}/{} ", b * o.context + s + n, o.batch * o.context);
        }
    if (rank0) fmt::print(stderr, "\n");
    // Timed decode steps, one row per sequence, in rounds: the machine may be shared, so each round is held
    // to the bandwidth measured around it and the round with the median ratio is reported.
    int64_t pos = o.context;
    std::vector<Round> rounds;
    for (int r = 0; r < o.rounds; ++r) {
        Round round;
        const double bw_before = rank0 ? measure_read_bandwidth(probe) : 0.0;
        m.set_profiling(true);
        ops::set_op_profiling(o.op_profile);
        ops::reset_op_profile();
        set_thread_profiling(o.thread_profile);  // (resets it)
        const auto t0 = std::chrono::steady_clock::now();
        for (int step = 0; step < o.steps; ++step, ++pos) {
            model::ForwardBatch batch;
            for (int b = 0; b < o.batch; ++b) {
                tokens[b].push_back(static_cast<int32_t>(3 + rng() % (c.vocab_size - 3)));
                batch.tokens.push_back(tokens[b].back());
                model::SeqChunk chunk = chunk_of(b, pos, 1);
                chunk.row_begin = b;
                batch.seqs.push_back(chunk);
                batch.logit_rows.push_back(b);
            }
            model::ForwardOutput out;
            Status st = m.forward(pools, batch, &out);
            if (!st.is_ok()) return fail(st);
        }
        round.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.steps;
        round.profile = m.profile();
        round.ops = ops::op_profile();
        ops::set_op_profiling(false);
        round.threads = thread_profile();
        set_thread_profiling(false);
        round.bandwidth = std::max(bw_before, rank0 ? measure_read_bandwidth(probe) : 0.0);
        for (int b = 0; b < c.num_hidden_layers && rank0; ++b) {
            round.layers_seconds += round.profile.block_seconds[b] / o.steps;
            round.layers_roofline += model::decode_traffic(c, b, pos - o.steps / 2, o.batch, o.engine.tp, o.engine.ep).total() /
                                     (round.bandwidth * 1e9);
        }
        if (rank0)
            fmt::print(stderr, "bench-decode: round {}/{}: {:.3f} ms per step, read bandwidth {:.1f} GB/s, layers {:.2f}x roofline\n",
                       r + 1, o.rounds, round.step_seconds * 1e3, round.bandwidth,
                       round.layers_seconds / round.layers_roofline);
        rounds.push_back(std::move(round));
    }
    if (!rank0) {
        world.reset();
        (void)dist::finalize_mpi();
        return 0;
    }
    std::vector<double> ratios;
    for (const Round& r : rounds) ratios.push_back(r.layers_seconds / r.layers_roofline);
    std::vector<size_t> order(rounds.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ratios[a] < ratios[b]; });
    const Round& med = rounds[order[order.size() / 2]];
    const model::ForwardProfile& p = med.profile;
    const double bandwidth = med.bandwidth, total = med.step_seconds;
    const int64_t mid_context = o.context + decode_steps / 2;
    nlohmann::json rows = nlohmann::json::array();
    fmt::print("decode step: batch {}, context {}, {} rounds of {} steps, tp {} ep {}; the median round (layers {:.2f}x "
               "roofline; all rounds {:.2f}-{:.2f}x), read bandwidth {:.1f} GB/s around it\n",
               o.batch, mid_context, o.rounds, o.steps, o.engine.tp, o.engine.ep, ratios[order[order.size() / 2]],
               ratios[order.front()], ratios[order.back()], bandwidth);
    fmt::print("{:<10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>8}\n", "block", "time ms", "attn ms", "moe ms",
               "engram ms", "MB read", "roofline ms", "x roof");
    double sum_time = 0, sum_roof = 0;
    for (int b = 0; b < c.num_hidden_layers; ++b) {
        const double t = p.block_seconds[b] / o.steps, ta = p.attention_seconds[b] / o.steps,
                     tm = p.moe_seconds[b] / o.steps, te = p.engram_seconds[b] / o.steps;
        const model::BlockTraffic tr = model::decode_traffic(c, b, mid_context, o.batch, o.engine.tp, o.engine.ep);
        const double roof = tr.total() / (bandwidth * 1e9);
        sum_time += t;
        sum_roof += roof;
        fmt::print("{:<10} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.2f} {:>11.3f} {:>8.2f}\n", c.block_prefix(b),
                   t * 1e3, ta * 1e3, tm * 1e3, te * 1e3, tr.total() / 1e6, roof * 1e3, t / roof);
        rows.push_back({{"block", c.block_prefix(b)}, {"seconds", t}, {"attention_seconds", ta}, {"moe_seconds", tm},
                        {"engram_seconds", te}, {"bytes", tr.total()}, {"roofline_seconds", roof}});
    }
    const double head = p.head_seconds / o.steps, head_roof = model::head_traffic(c, o.engine.tp) / (bandwidth * 1e9);
    fmt::print("{:<10} {:>10.3f} {:>10} {:>10} {:>10} {:>11.2f} {:>11.3f} {:>8.2f}\n", "head", head * 1e3, "", "", "",
               model::head_traffic(c, o.engine.tp) / 1e6, head_roof * 1e3, head / head_roof);
    fmt::print("layers: {:.3f} ms per step vs roofline {:.3f} ms ({:.2f}x); whole step {:.3f} ms\n", sum_time * 1e3,
               sum_roof * 1e3, sum_time / sum_roof, total * 1e3);
    nlohmann::json linears;
    if (o.op_profile) linears = print_op_profile(med, measure_peaks(), o.steps, sum_time);
    if (o.thread_profile) print_thread_profile(med, o.steps);
    if (o.json) {
        nlohmann::json j = {{"batch", o.batch}, {"context", mid_context}, {"steps", o.steps}, {"rounds", o.rounds},
                            {"round_ratios", ratios}, {"tp", o.engine.tp}, {"ep", o.engine.ep},
                            {"read_bandwidth_gbs", bandwidth}, {"blocks", rows}, {"head_seconds", head},
                            {"step_seconds", total}};
        if (o.op_profile) j["linears"] = linears;  // the median round's, per step
        fmt::print("{}\n", j.dump());
    }
    if (world) {
        world.reset();
        (void)dist::finalize_mpi();
    }
    return 0;
}

}  // namespace

Command make_bench_decode_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto o = std::make_shared<Options>();
        auto* sub = app.add_subcommand("bench-decode", "Decode-step time per layer against the memory roofline");
        sub->add_option("--model", o->engine.model_dir, "Checkpoint directory (default: the built-in tiny checkpoint)");
        sub->add_option("--threads", o->engine.threads, "Worker threads");
        sub->add_option("--context", o->context, "Positions already in the cache when decoding");
        sub->add_option("--batch", o->batch, "Sequences decoded together (one row each)");
        sub->add_option("--steps", o->steps, "Timed decode steps per round")->check(CLI::PositiveNumber);
        sub->add_option("--rounds", o->rounds, "Rounds of steps, each between two bandwidth measurements; the median "
                                               "round is reported")->check(CLI::PositiveNumber);
        sub->add_option("--tp", o->engine.tp, "Tensor-parallel ranks (under mpirun)");
        sub->add_option("--ep", o->engine.ep, "Expert-parallel ranks (under mpirun)");
        sub->add_flag("--json", o->json, "Also print the results as JSON (with --op-profile, each linear's too)");
        sub->add_flag("--op-profile", o->op_profile,
                      "Also time every linear (weight GEMV / GEMM) by kind and shape: ms, GB/s and fraction of the "
                      "bandwidth, GFLOP/s and fraction of the arithmetic peak, time against its roofline");
        sub->add_flag("--thread-profile", o->thread_profile,
                      "Also show how much of a step runs inside the thread pool's calls and how fully the threads "
                      "work there (many-core scaling)");
        sub->callback([o, exit_code] { *exit_code = run(*o); });
    }};
}

}  // namespace deepinfer::cli
