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
        const size_t before_engine = sub->get_options().size();
        add_engine_options(sub, &o->engine);
        // the engine's options (a server has its own) and the options of the online mode alone
        auto engine_options = std::make_shared<std::vector<const CLI::Option*>>();
        for (const CLI::Option* opt : sub->get_options()) engine_options->push_back(opt);
        engine_options->erase(engine_options->begin(), engine_options->begin() + static_cast<long>(before_engine));
        auto online_options = std::make_shared<std::vector<const CLI::Option*>>();
        auto* lens = sub->add_option("--input-lens", o->input_lens, "Prompt lengths in tokens, comma separated (default 512,1024,2048,8192 offline, 512 online)")
                         ->delimiter(',');
        sub->add_option("--output-len", o->output_len, "Tokens generated per request (ignore_eos, greedy)");
        sub->add_option("--num-prompts", o->num_prompts, "Requests per (input length, concurrency) run");
        sub->add_option("--concurrency", o->concurrency, "Requests in flight at most; a comma-separated list runs each")->delimiter(',');
        online_options->push_back(sub->add_option("--request-rate", o->request_rate,
                                                  "Online: Poisson arrival rate in requests/s (default: all at once)"));
        sub->add_option("--url", o->url, "Online: base URL of a running server, e.g. http://127.0.0.1:8000");
        online_options->push_back(sub->add_option(
            "--served-model-name", o->model_name, "Online: model name to request (default: the first of GET /v1/models)"));
        online_options->push_back(sub->add_option("--api-key", o->api_key, "Online: API key of the server"));
        online_options->push_back(
            sub->add_option("--prompt-vocab", o->prompt_vocab, "Online: prompt token ids are drawn from [3, N)"));
        sub->add_option("--seed", o->seed, "Seed of the random prompts");
        sub->add_flag("--json", o->json, "Print the results as JSON on stdout");
        sub->callback([o, lens, exit_code, engine_options, online_options] {
            const std::string refused = given_option_names(o->url.empty() ? *online_options : *engine_options);
            if (!refused.empty()) {
                if (o->url.empty()) fmt::print(stderr, "bench: {} apply to an online run (--url) only\n", refused);
                else
                    fmt::print(stderr, "bench: --url measures a running server, whose engine options are its own; "
                                       "not {} (give them to deepinfer serve)\n", refused);
                *exit_code = 2;
                return;
            }
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
