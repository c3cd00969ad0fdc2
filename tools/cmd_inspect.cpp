// `deepinfer inspect`: validate a checkpoint (config, census of every tensor) and print what it holds:
// layer roles, tensor counts per role, bytes per dtype, cache bytes per token of context.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/log.h"
#include "loader/safetensors.h"
#include "model/census.h"
#include "model/config.h"
#include "tiny/default_model.h"
#include "tools/commands.h"

namespace deepinfer::cli {
namespace {

void print_config_summary(const model::ModelConfig& c) {
    fmt::print("architecture: {}  vocab {}  hidden {}  layers {} (+{} DSpark)  heads {} x {} (rope {})\n",
               c.architecture, c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_nextn_predict_layers,
               c.num_attention_heads, c.head_dim, c.qk_rope_head_dim);
    fmt::print("experts: {} routed, top-{}, inter {}; window {}; index top-k {}; Engram layers {}\n", c.n_routed_experts,
               c.num_experts_per_tok, c.moe_intermediate_size, c.sliding_window, c.index_topk,
               fmt::join(c.engram_layer_ids, ","));
    fmt::print("layer roles:\n{}", model::describe_layer_roles(c));
    model::CacheFootprint f = model::cache_footprint(c);
    fmt::print("cache: {:.1f} B per token of context (compressed KV + index keys), {:.2f} MB of window rings per "
               "sequence\n", f.compressed_bytes_per_token, f.window_bytes_per_sequence / 1e6);
}

int run(const std::string& model_dir_arg, bool released) {
    if (released) {
        fmt::print("released DeepSeek-V4.1-Flash configuration (spec §2.2):\n");
        print_config_summary(model::ModelConfig::released());
        return 0;
    }
    auto dir = tiny::resolve_model_dir(model_dir_arg);
    if (!dir) {
        fmt::print(stderr, "error: {}\n", dir.status().message());
        return 1;
    }
    auto config = model::load_model_config(*dir + "/config.json");
    if (!config) {
        fmt::print(stderr, "error: invalid checkpoint: {}\n", config.status().message());
        return 1;
    }
    fmt::print("checkpoint: {}\n", *dir);
    print_config_summary(*config);
    auto store = loader::TensorStore::open_dir(*dir);
    if (!store) {
        fmt::print(stderr, "error: invalid checkpoint: {}\n", store.status().message());
        return 1;
    }
    model::CensusReport report;
    Status census = model::check_checkpoint(*config, *store, &report);
    fmt::print("tensors: {} in {} file(s), {:.2f} MB\n", report.n_tensors, store->files().size(), report.total_bytes / 1e6);
    fmt::print("bytes per dtype:\n");
    for (const auto& [dtype, bytes] : report.bytes_per_dtype) fmt::print("  {:<8} {:>14}\n", dtype, bytes);
    fmt::print("tensors per role:\n");
    for (const auto& [role, count] : report.tensors_per_role) fmt::print("  {:<32} {:>6}\n", role, count);
    if (report.n_vision_tensors) fmt::print("  (vision, unused)                 {:>6}\n", report.n_vision_tensors);
    if (!census.is_ok()) {
        fmt::print(stderr, "error: invalid checkpoint: {}\n", census.message());
        return 1;
    }
    fmt::print("validation: ok\n");
    return 0;
}

}  // namespace

Command make_inspect_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto* sub = app.add_subcommand("inspect", "Validate a checkpoint and print its census, layer roles and cache size");
        auto model = std::make_shared<std::string>();
        auto released = std::make_shared<bool>(false);
        const CLI::Option* model_opt =
            sub->add_option("--model", *model, "Checkpoint directory (default: the built-in tiny checkpoint)");
        sub->add_flag("--released-config", *released, "Describe the released configuration (no weights needed)");
        sub->callback([=] {
            if (*released && model_opt->count() > 0) {  // it reads no checkpoint
                fmt::print(stderr, "inspect: --released-config describes the release itself; not with --model\n");
                *exit_code = 2;
                return;
            }
            *exit_code = run(*model, *released);
        });
    }};
}

}  // namespace deepinfer::cli
