// `deepinfer draft`: one DSpark drafting pass as the reference runs it (spec §7.2): prefill the prompt
// (seeding the DSpark rings), decode the greedy next token at position P, then draft from that row.
// Prints the draft tokens and confidences as JSON; --dump-logits writes the Markov-biased logits [B, vocab].
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/npy.h"
#include "core/thread_pool.h"
#include "kv/sequence_cache.h"
#include "model/model.h"
#include "tiny/default_model.h"
#include "tools/commands.h"

namespace deepinfer::cli {
namespace {

struct Options {
    std::string model, prompt_ids, dump_logits;
    int threads = 0;
};

int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

int run(const Options& o) {
    ThreadPool::set_global_threads(o.threads);
    auto dir = tiny::resolve_model_dir(o.model);
    if (!dir) {
        fmt::print(stderr, "error: {}\n", dir.status().message());
        return 1;
    }
    auto loaded = model::Model::load(*dir, false);
    if (!loaded) {
        fmt::print(stderr, "error: {}\n", loaded.status().message());
        return 1;
    }
    model::Model& m = **loaded;
    const model::ModelConfig& c = m.config();
    if (!c.has_dspark()) {
        fmt::print(stderr, "error: {}: the checkpoint has no DSpark blocks\n", *dir);
        return 1;
    }
    std::vector<int32_t> prompt;
    std::stringstream ss(o.prompt_ids);
    std::string item;
    while (std::getline(ss, item, ',')) prompt.push_back(static_cast<int32_t>(std::stol(item)));
    if (prompt.empty()) {
        fmt::print(stderr, "error: --prompt-ids: no ids\n");
        return 2;
    }
    const int64_t P = static_cast<int64_t>(prompt.size());
    kv::KvPools pools(m.cache_layout(), static_cast<int32_t>((P + 2) / m.cache_layout().block_tokens + 2),
                      static_cast<int32_t>((P + 2) / m.cache_layout().block_tokens + 2));
    kv::SequenceCache cache(pools.layout);
    if (!cache.ensure_blocks(pools, P + 1)) return 1;
    auto run_chunk = [&](const std::vector<int32_t>& tokens, int64_t start, const std::vector<int32_t>& history,
                         model::ForwardOutput* out) {
        model::ForwardBatch batch;
        batch.tokens = tokens;
        model::SeqChunk chunk;
        chunk.cache = &cache;
        chunk.start_pos = start;
        chunk.n_rows = static_cast<int32_t>(tokens.size());
        chunk.history = history;
        batch.seqs.push_back(chunk);
        batch.logit_rows = {chunk.n_rows - 1};
        batch.dspark_rings = true;
        batch.want_main_hidden = true;
        return m.forward(pools, batch, out);
    };
    model::ForwardOutput prefill, decode;
    Status s = run_chunk(prompt, 0, {}, &prefill);
    if (!s.is_ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 1;
    }
    const int32_t next = argmax(prefill.logits.data(), c.vocab_size);
    std::vector<int32_t> history(prompt.end() - std::min<int64_t>(P, 3), prompt.end());
    s = run_chunk({next}, P, history, &decode);
    if (!s.is_ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 1;
    }
    const int32_t sampled = argmax(decode.logits.data(), c.vocab_size);
    model::DraftRequest req;
    req.cache = &cache;
    req.pos = P;
    req.sampled_token = sampled;
    req.main_hidden = decode.main_hidden.data();
    model::DraftOutput draft;
    s = m.draft(pools, req, &draft);
    if (!s.is_ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 1;
    }
    nlohmann::json j;
    j["prompt_ids"] = prompt;
    j["prefill_next"] = next;
    j["decode_position"] = P;
    j["tokens"] = draft.tokens;
    j["confidence"] = draft.confidence;
    fmt::print("{}\n", j.dump());
    if (!o.dump_logits.empty()) {
        s = write_npy_f32(o.dump_logits, {c.dspark_block_size, c.vocab_size}, draft.logits.data());
        if (!s.is_ok()) {
            fmt::print(stderr, "error: {}\n", s.message());
            return 1;
        }
    }
    return 0;
}

}  // namespace

Command make_draft_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto o = std::make_shared<Options>();
        auto* sub = app.add_subcommand("draft", "Run one DSpark drafting pass after a prompt (greedy), as the reference does");
        sub->add_option("--model", o->model, "Checkpoint directory (default: the built-in tiny checkpoint)");
        sub->add_option("--prompt-ids", o->prompt_ids, "Prompt token ids, comma separated")->required();
        sub->add_option("--dump-logits", o->dump_logits, "Write the Markov-biased draft logits as .npy [block, vocab]");
        sub->add_option("--threads", o->threads, "Worker threads");
        sub->callback([o, exit_code] { *exit_code = run(*o); });
    }};
}

}  // namespace deepinfer::cli
