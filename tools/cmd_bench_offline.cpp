// `deepinfer bench` offline: an in-process engine on its background loop; random prompts of each input
// length submitted with at most `concurrency` in flight; TTFT, TPOT, ITL and throughput per run.
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "model/config.h"
#include "dist/mpi_comm.h"
#include "tools/cmd_bench_common.h"

namespace deepinfer::cli::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Run {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<RequestTiming> timings;
    std::vector<Clock::time_point> sent, last;
    int finished = 0;
};

// One (input length, concurrency) run. Returns false when the engine refused a request.
bool run_one(Engine& engine, const BenchOptions& o, int64_t input_len, int concurrency, Summary* out) {
    // Fresh prompts per run (seeded by length and concurrency): a run never hits the prefix cache of another.
    const auto prompts = random_prompts(engine.tokenizer(), engine.model_config().vocab_size, o.num_prompts, input_len,
                                        o.seed * 1000003 + static_cast<uint64_t>(input_len) * 1009 + static_cast<uint64_t>(concurrency));
    Run run;
    const size_t n = prompts.size();
    run.timings.resize(n);
    run.sent.resize(n);
    run.last.resize(n);
    const std::string label = fmt::format("in {} c{}", input_len, concurrency);
    const auto start = Clock::now();
    auto last_progress = start;
    size_t next = 0;
    std::unique_lock<std::mutex> lock(run.mutex);
    while (run.finished < static_cast<int>(n)) {
        while (static_cast<int>(next) - run.finished < concurrency && next < n) {
            const size_t i = next++;
            GenerationRequest r;
            r.id = fmt::format("bench-{}-{}-{}", input_len, concurrency, i);
            r.prompt = prompts[i];
            r.params.temperature = 0.0f;
            r.params.max_tokens = static_cast<int>(o.output_len);
            r.params.ignore_eos = true;
            run.timings[i].input_tokens = input_len;
            run.sent[i] = Clock::now();
            lock.unlock();
            Status s = engine.submit(std::move(r), [&run, i](const GenerationOutput& ev) {
                const auto now = Clock::now();
                std::lock_guard<std::mutex> guard(run.mutex);
                RequestTiming& t = run.timings[i];
                if (!ev.token_ids.empty()) {
                    if (t.output_tokens == 0) t.ttft = seconds(run.sent[i], now);
                    else t.itl.push_back(seconds(run.last[i], now));
                    run.last[i] = now;
                    t.output_tokens = ev.completion_tokens;
                }
                if (ev.finished) {
                    t.ok = ev.finish_reason != "abort";
                    if (!t.ok) t.error = "aborted";
                    t.latency = seconds(run.sent[i], now);
                    ++run.finished;
                    run.cv.notify_one();
                }
            });
            lock.lock();
            if (!s.is_ok()) {
                fmt::print(stderr, "error: {}\n", s.message());
                return false;
            }
        }
        const int before = run.finished;
        run.cv.wait_for(lock, std::chrono::seconds(1), [&] { return run.finished > before; });
        const auto now = Clock::now();
        if (seconds(last_progress, now) >= 2.0 || run.finished == static_cast<int>(n)) {
            int64_t tokens = 0;
            for (const auto& t : run.timings) tokens += t.output_tokens;
            fmt::print(stderr, "bench [{}]: {}/{} requests done, {} tokens generated, {:.1f} s\n", label, run.finished, n,
                       tokens, seconds(start, now));
            last_progress = now;
        }
    }
    *out = summarize(label, run.timings, seconds(start, Clock::now()));
    out->input_len = input_len;
    out->output_len = o.output_len;
    out->concurrency = concurrency;
    return true;
}

}  // namespace

int run_offline(const BenchOptions& o, dist::Comm* world) {
    if (o.num_prompts < 1 || o.output_len < 1) {
        fmt::print(stderr, "error: --num-prompts and --output-len must be >= 1\n");
        return 2;
    }
    for (int c : o.concurrency)
        if (c < 1) {
            fmt::print(stderr, "error: --concurrency values must be >= 1, got {}\n", c);
            return 2;
        }
    EngineConfig config = o.engine;
    auto engine = Engine::create(config, world);
    if (!engine) {
        fmt::print(stderr, "error: {}\n", engine.status().message());
        if (world) dist::abort_mpi(1);
        return 1;
    }
    Engine& e = **engine;
    for (int64_t len : o.input_lens) {
        if (len < 1 || len + o.output_len > e.max_model_len()) {
            fmt::print(stderr, "error: --input-lens {} + --output-len {} must fit the max model len {}\n", len, o.output_len,
                       e.max_model_len());
            return 2;
        }
    }
    e.start();
    // Warm-up: one short request pages in the weights and the first KV blocks.
    {
        BenchOptions warm = o;
        warm.num_prompts = 1;
        warm.output_len = 4;
        Summary ignored;
        if (!run_one(e, warm, 16, 1, &ignored)) return 1;
    }
    std::vector<Summary> rows;
    for (int64_t len : o.input_lens) {
        for (int c : o.concurrency) {
            Summary s;
            if (!run_one(e, o, len, c, &s)) return 1;
            rows.push_back(s);
        }
    }
    e.stop(true);
    if (o.json) {
        nlohmann::ordered_json j = {{"mode", "offline"}, {"model", e.model_name()}, {"num_prompts", o.num_prompts}, {"results", nlohmann::ordered_json::array()}};
        for (const auto& s : rows) j["results"].push_back(summary_json(s));
        fmt::print("{}\n", j.dump(2));
    } else {
        fmt::print("offline benchmark: model {}, {} prompts per run, {} output tokens, greedy, ignore_eos\n", e.model_name(),
                   o.num_prompts, o.output_len);
        fmt::print("{}", summary_table(rows));
    }
    return 0;
}

}  // namespace deepinfer::cli::bench
