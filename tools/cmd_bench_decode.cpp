// `deepinfer bench-decode`: decode-step time per block against its memory roofline (bytes the block must
// read / the read bandwidth measured in the same run), on any checkpoint (e.g. `make-tiny --preset release`:
// the released dimensions with two layers). Under mpirun with --tp / --ep, every rank runs the same steps on
// its shard and rank 0 reports.
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "dist/mpi_comm.h"
#include "engine/parallel_setup.h"
#include "model/model.h"
#include "model/roofline.h"
#include "tiny/default_model.h"
#include "tools/commands.h"
#include "core/env.h"

namespace deepinfer::cli {
namespace {

struct Options {
    EngineConfig engine;
    int64_t context = 512;
    int batch = 1, steps = 8;
    bool json = false;
};

// Read bandwidth of all threads over a buffer far larger than the caches (GB/s, best of 3).
double measure_read_bandwidth() {
    const size_t bytes = size_t{1} << 30;
    AlignedBuffer buffer(bytes);
    float* f = buffer.as<float>();
    const size_t n = bytes / sizeof(float);
    ThreadPool::global().parallel_for(n, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; ++i) f[i] = static_cast<float>(i & 7);
    });
    double best = 0.0;
    for (int rep = 0; rep < 3; ++rep) {
        std::vector<float> sums(ThreadPool::global().size(), 0.0f);
        auto t0 = std::chrono::steady_clock::now();
        ThreadPool::global().parallel_for(n, [&](size_t b, size_t e, int t) {
            float acc[16] = {};
            size_t i = b;
            for (; i + 16 <= e; i += 16)
                for (int j = 0; j < 16; ++j) acc[j] += f[i + j];
            float s = 0;
            for (float a : acc) s += a;
            for (; i < e; ++i) s += f[i];
            sums[t] += s;
        });
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, bytes / secs / 1e9);
        if (sums[0] < 0) fmt::print("");  // keep the reads
    }
    return best;
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
    const double bandwidth = rank0 ? measure_read_bandwidth() : 0.0;
    if (rank0) fmt::print(stderr, "bench-decode: read bandwidth {:.1f} GB/s ({} threads)\n", bandwidth, ThreadPool::global().size());

    const int T = 64;
    const int32_t blocks = static_cast<int32_t>(o.batch * ((o.context + o.steps + T) / T + 2));
    kv::KvPools pools(model::make_cache_layout(c, T), blocks, blocks);
    std::vector<std::unique_ptr<kv::SequenceCache>> caches;
    std::vector<std::vector<int32_t>> tokens(o.batch);
    std::mt19937_64 rng(1);
    for (int b = 0; b < o.batch; ++b) {
        caches.push_back(std::make_unique<kv::SequenceCache>(pools.layout));
        caches.back()->ensure_blocks(pools, o.context + o.steps + 1);
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
    // Timed decode steps: one row per sequence.
    m.set_profiling(true);
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < o.steps; ++step) {
        model::ForwardBatch batch;
        for (int b = 0; b < o.batch; ++b) {
            const int64_t pos = o.context + step;
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
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.steps;
    if (!rank0) {
        world.reset();
        (void)dist::finalize_mpi();
        return 0;
    }
    const model::ForwardProfile& p = m.profile();
    nlohmann::json rows = nlohmann::json::array();
    fmt::print("decode step: batch {}, context {}, {} steps, tp {} ep {}; read bandwidth {:.1f} GB/s\n", o.batch,
               o.context, o.steps, o.engine.tp, o.engine.ep, bandwidth);
    fmt::print("{:<10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>8}\n", "block", "time ms", "attn ms", "moe ms", "MB read",
               "roofline ms", "x roof");
    double sum_time = 0, sum_roof = 0;
    for (int b = 0; b < c.num_hidden_layers; ++b) {
        const double t = p.block_seconds[b] / o.steps, ta = p.attention_seconds[b] / o.steps, tm = p.moe_seconds[b] / o.steps;
        const model::BlockTraffic tr = model::decode_traffic(c, b, o.context, o.batch, o.engine.tp, o.engine.ep);
        const double roof = tr.total() / (bandwidth * 1e9);
        sum_time += t;
        sum_roof += roof;
        fmt::print("{:<10} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.2f} {:>11.3f} {:>8.2f}\n", c.block_prefix(b), t * 1e3, ta * 1e3,
                   tm * 1e3, tr.total() / 1e6, roof * 1e3, t / roof);
        rows.push_back({{"block", c.block_prefix(b)}, {"seconds", t}, {"attention_seconds", ta}, {"moe_seconds", tm},
                        {"bytes", tr.total()}, {"roofline_seconds", roof}});
    }
    const double head = p.head_seconds / o.steps, head_roof = model::head_traffic(c) / (bandwidth * 1e9);
    fmt::print("{:<10} {:>10.3f} {:>10} {:>10} {:>11.2f} {:>11.3f} {:>8.2f}\n", "head", head * 1e3, "", "",
               model::head_traffic(c) / 1e6, head_roof * 1e3, head / head_roof);
    fmt::print("layers: {:.3f} ms per step vs roofline {:.3f} ms ({:.2f}x); whole step {:.3f} ms\n", sum_time * 1e3,
               sum_roof * 1e3, sum_time / sum_roof, total * 1e3);
    if (o.json) {
        nlohmann::json j = {{"batch", o.batch}, {"context", o.context}, {"steps", o.steps}, {"tp", o.engine.tp},
                            {"ep", o.engine.ep}, {"read_bandwidth_gbs", bandwidth}, {"blocks", rows},
                            {"head_seconds", head}, {"step_seconds", total}};
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
        sub->add_option("--steps", o->steps, "Timed decode steps");
        sub->add_option("--tp", o->engine.tp, "Tensor-parallel ranks (under mpirun)");
        sub->add_option("--ep", o->engine.ep, "Expert-parallel ranks (under mpirun)");
        sub->add_flag("--json", o->json, "Also print the results as JSON");
        sub->callback([o, exit_code] { *exit_code = run(*o); });
    }};
}

}  // namespace deepinfer::cli
