// `deepinfer bench`: serving benchmarks. Offline (default): random prompts through an in-process engine.
// Online (--url): streaming /v1/completions requests against a running server, Poisson arrivals.
#include <fmt/format.h>

#include "tools/mpi_launch.h"
#include "tools/cmd_bench_common.h"
#include "tools/commands.h"

namespace deepinfer::cli {

Command make_bench_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto o = std::make_shared<bench::BenchOptions>();
        auto* sub = app.add_subcommand("bench", "Benchmark TTFT / TPOT / throughput offline (engine) or online (--url)");
        add_engine_options(sub, &o->engine);
        auto* lens = sub->add_option("--input-lens", o->input_lens, "Prompt lengths in tokens, comma separated (default 512,1024,2048,8192 offline, 512 online)")
                         ->delimiter(',');
        sub->add_option("--output-len", o->output_len, "Tokens generated per request (ignore_eos, greedy)");
        sub->add_option("--num-prompts", o->num_prompts, "Requests per (input length, concurrency) run");
        sub->add_option("--concurrency", o->concurrency, "Requests in flight at most; a comma-separated list runs each")->delimiter(',');
        sub->add_option("--request-rate", o->request_rate, "Online: Poisson arrival rate in requests/s (default: all at once)");
        sub->add_option("--url", o->url, "Online: base URL of a running server, e.g. http://127.0.0.1:8000");
        sub->add_option("--served-model-name", o->model_name, "Online: model name to request (default: the first of GET /v1/models)");
        sub->add_option("--api-key", o->api_key, "Online: API key of the server");
        sub->add_option("--prompt-vocab", o->prompt_vocab, "Online: prompt token ids are drawn from [3, N)");
        sub->add_option("--seed", o->seed, "Seed of the random prompts");
        sub->add_flag("--json", o->json, "Print the results as JSON on stdout");
        sub->callback([o, lens, exit_code] {
            if (o->url.empty()) {
                *exit_code = run_with_ranks(o->engine, [&](dist::Comm* world) { return bench::run_offline(*o, world); });
                return;
            }
            if (lens->count() == 0) o->input_lens = {512};
            *exit_code = bench::run_online(*o);
        });
    }};
}

}  // namespace deepinfer::cli
