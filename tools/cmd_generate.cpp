// `deepinfer generate`: offline generation through the engine: one prompt (text or ids), or a JSONL file
// of prompts; greedy or sampled; teacher forcing of a given continuation with the logits dumped as .npy.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/npy.h"
#include "deepinfer/engine.h"
#include "dist/mpi_comm.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/mpi_launch.h"

namespace deepinfer::cli {
namespace {

struct Options {
    EngineConfig engine;
    std::string prompt, prompt_ids, teacher_ids, prompts_file, output_file, dump_logits;
    SamplingParams params;
    bool json = false;
    std::vector<std::string> stop;
};

Expected<std::vector<int32_t>> parse_ids(const std::string& text, const char* what) {
    std::vector<int32_t> ids;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.find_first_not_of(" ") == std::string::npos) continue;
        try {
            size_t used = 0;
            long v = std::stol(item, &used);
            if (item.find_first_not_of(" ", used) != std::string::npos) throw std::invalid_argument(item);
            ids.push_back(static_cast<int32_t>(v));
        } catch (const std::exception&) {
            return invalid_argument("{}: \"{}\" is not a token id", what, item);
        }
    }
    return ids;
}

nlohmann::json output_json(const GenerationRequest& req, const GenerationOutput& out) {
    nlohmann::json j;
    j["id"] = out.request_id;
    j["prompt_ids"] = req.prompt;
    j["output_ids"] = out.token_ids;
    j["text"] = out.text;
    j["finish_reason"] = out.finish_reason;
    j["prompt_tokens"] = out.prompt_tokens;
    j["completion_tokens"] = out.completion_tokens;
    return j;
}

int run(Options& o, dist::Comm* world) {
    auto engine = Engine::create(o.engine, world);
    if (!engine) {
        fmt::print(stderr, "error: {}\n", engine.status().message());
        if (world) dist::abort_mpi(1);  // the other ranks wait for plans that will never come
        return 1;
    }
    Engine& e = **engine;
    o.params.stop = o.stop;
    std::vector<GenerationRequest> requests;
    if (!o.prompts_file.empty()) {
        std::ifstream in(o.prompts_file);
        if (!in) {
            fmt::print(stderr, "error: --prompts-file {}: cannot open\n", o.prompts_file);
            return 2;
        }
        std::string line;
        int line_no = 0;
        while (std::getline(in, line)) {
            ++line_no;
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_discarded() || !j.is_object()) {
                fmt::print(stderr, "error: {}:{}: not a JSON object\n", o.prompts_file, line_no);
                return 2;
            }
            GenerationRequest r;
            r.params = o.params;
            r.id = j.value("id", fmt::format("line-{}", line_no));
            if (j.contains("prompt_ids")) {
                r.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
            } else if (j.contains("prompt") && j["prompt"].is_string()) {
                auto ids = e.tokenizer().encode(j["prompt"].get<std::string>());
                if (!ids) {
                    fmt::print(stderr, "error: {}:{}: {}\n", o.prompts_file, line_no, ids.status().message());
                    return 2;
                }
                r.prompt = *ids;
            } else {
                fmt::print(stderr, "error: {}:{}: needs \"prompt\" (text) or \"prompt_ids\"\n", o.prompts_file, line_no);
                return 2;
            }
            if (j.contains("max_tokens")) r.params.max_tokens = j["max_tokens"].get<int>();
            if (j.contains("temperature")) r.params.temperature = j["temperature"].get<float>();
            if (j.contains("seed")) r.params.seed = j["seed"].get<uint64_t>();
            requests.push_back(std::move(r));
        }
    } else {
        GenerationRequest r;
        r.id = "cli";
        r.params = o.params;
        if (!o.prompt_ids.empty()) {
            auto ids = parse_ids(o.prompt_ids, "--prompt-ids");
            if (!ids) {
                fmt::print(stderr, "error: {}\n", ids.status().message());
                return 2;
            }
            r.prompt = *ids;
        } else {
            auto ids = e.tokenizer().encode(o.prompt);
            if (!ids) {
                fmt::print(stderr, "error: --prompt: {}\n", ids.status().message());
                return 2;
            }
            r.prompt = *ids;
        }
        if (!o.teacher_ids.empty()) {
            auto ids = parse_ids(o.teacher_ids, "--teacher-ids");
            if (!ids) {
                fmt::print(stderr, "error: {}\n", ids.status().message());
                return 2;
            }
            // Row i of the logits = the prediction after prompt + teacher[:i]; rows 0..len(teacher).
            r.forced_output = *ids;
            r.params.max_tokens = static_cast<int>(ids->size()) + 1;
            r.params.ignore_eos = true;
            r.params.min_tokens = 0;
        }
        r.return_logits = !o.dump_logits.empty();
        requests.push_back(std::move(r));
    }
    auto outs = e.generate(requests);
    if (!outs) {
        fmt::print(stderr, "error: {}\n", outs.status().message());
        return 2;
    }
    std::ofstream file;
    if (!o.output_file.empty()) file.open(o.output_file);
    for (size_t i = 0; i < outs->size(); ++i) {
        const GenerationOutput& out = (*outs)[i];
        const GenerationRequest& req = requests[std::min(i, requests.size() - 1)];
        if (!o.output_file.empty()) {
            file << output_json(req, out).dump() << "\n";
        } else if (o.json) {
            fmt::print("{}\n", output_json(req, out).dump());
        } else {
            fmt::print("{}\n", out.text);
            fmt::print(stderr, "[{} prompt tokens, {} generated, finish: {}]\n", out.prompt_tokens, out.completion_tokens,
                       out.finish_reason);
        }
    }
    if (!o.dump_logits.empty()) {
        const GenerationOutput& out = outs->front();
        const int64_t vocab = out.logits.empty() ? 0 : static_cast<int64_t>(out.logits.front().size());
        std::vector<float> flat;
        for (const auto& row : out.logits) flat.insert(flat.end(), row.begin(), row.end());
        Status s = write_npy_f32(o.dump_logits, {static_cast<int64_t>(out.logits.size()), vocab}, flat.data());
        if (!s.is_ok()) {
            fmt::print(stderr, "error: {}\n", s.message());
            return 1;
        }
    }
    return 0;
}

}  // namespace

void add_engine_options(CLI::App* sub, EngineConfig* c) {
    sub->add_option("--model", c->model_dir, "Checkpoint directory (default: the built-in tiny checkpoint)");
    sub->add_option("--threads", c->threads, "Worker threads (default: all cores)");
    sub->add_option("--num-kv-blocks", c->num_kv_blocks, "Blocks in the compressed-KV pool (default: from --kv-cache-memory)");
    sub->add_option("--kv-cache-memory", c->kv_cache_memory, "Bytes for the KV pools (default 1 GiB)");
    sub->add_option("--block-tokens", c->block_tokens, "Positions per KV block");
    sub->add_option("--max-num-seqs", c->max_num_seqs, "Sequences running at once");
    sub->add_option("--max-num-batched-tokens", c->max_num_batched_tokens, "Tokens per engine step");
    sub->add_option("--max-model-len", c->max_model_len, "Longest context (prompt + output)");
    sub->add_flag("!--no-prefix-caching", c->enable_prefix_caching, "Disable prefix caching");
    sub->add_option("--speculative-tokens", c->speculative_tokens, "DSpark drafts verified per step (0 = off)");
    sub->add_option("--tp", c->tp, "Tensor-parallel ranks for attention (under mpirun)");
    sub->add_option("--ep", c->ep, "Expert-parallel ranks for the routed experts (under mpirun)");
    sub->add_option("--dp", c->dp, "DP attention over this many ranks, experts split over the same ranks (under mpirun)");
    sub->add_flag("!--no-engram-shm", c->engram_shared_memory,
                  "Multi-rank: read the Engram tables from the mapped checkpoint instead of one shared copy per host");
}

Command make_generate_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto o = std::make_shared<Options>();
        o->params.max_tokens = 32;
        auto* sub = app.add_subcommand("generate", "Generate text offline through the engine");
        add_engine_options(sub, &o->engine);
        const CLI::Option* prompt = sub->add_option("--prompt", o->prompt, "Prompt text");
        const CLI::Option* prompt_ids =
            sub->add_option("--prompt-ids", o->prompt_ids, "Prompt token ids, comma separated");
        const CLI::Option* prompts_file = sub->add_option(
            "--prompts-file", o->prompts_file, "JSONL: one {\"prompt\": ...} or {\"prompt_ids\": [...]} per line");
        sub->add_option("--output", o->output_file, "Write JSONL results here");
        const CLI::Option* teacher = sub->add_option(
            "--teacher-ids", o->teacher_ids,
            "Teacher-force this continuation (comma separated ids); the run takes its length + 1 steps");
        const CLI::Option* dump = sub->add_option(
            "--dump-logits", o->dump_logits, "Write the fp32 logits of every step as .npy [steps, vocab] (one prompt)");
        const CLI::Option* max_tokens = sub->add_option("--max-tokens", o->params.max_tokens, "New tokens at most");
        sub->add_option("--temperature", o->params.temperature, "0 = greedy");
        sub->add_option("--top-p", o->params.top_p, "Nucleus sampling mass");
        sub->add_option("--top-k", o->params.top_k, "Keep the k most likely tokens (0 = off)");
        sub->add_option("--min-p", o->params.min_p, "Minimum probability relative to the most likely token");
        sub->add_option("--seed", o->params.seed, "Sampling seed");
        sub->add_option("--stop", o->stop, "Stop string (repeatable)");
        sub->add_flag("--ignore-eos", o->params.ignore_eos, "Keep generating past the end-of-sequence token");
        sub->add_flag("--json", o->json, "Print JSON instead of text");
        sub->callback([=] {
            // Options that would otherwise be dropped without a word: one prompt source; teacher forcing and the
            // logits dump take the one prompt of --prompt / --prompt-ids; teacher forcing sets the step count.
            std::string refused;
            if (prompt->count() + prompt_ids->count() + prompts_file->count() > 1)
                refused = "give one of --prompt, --prompt-ids, --prompts-file, not " +
                          given_option_names({prompt, prompt_ids, prompts_file});
            else if (prompts_file->count() > 0 && (teacher->count() > 0 || dump->count() > 0))
                refused = given_option_names({teacher, dump}) + ": one prompt only (--prompt or --prompt-ids), not "
                          "--prompts-file";
            else if (teacher->count() > 0 && max_tokens->count() > 0)
                refused = "--teacher-ids runs its length + 1 steps; not --max-tokens";
            if (!refused.empty()) {
                fmt::print(stderr, "generate: {}\n", refused);
                *exit_code = 2;
                return;
            }
            *exit_code = run_with_ranks(o->engine, [&](dist::Comm* world) { return run(*o, world); });
        });
    }};
}

}  // namespace deepinfer::cli
