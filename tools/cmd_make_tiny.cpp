// `deepinfer make-tiny`: generate a complete V4.1 checkpoint in the released layout (tiny/generator.h).
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/log.h"
#include "tiny/generator.h"
#include "tiny/presets.h"
#include "tiny/tokenizer_assets.h"
#include "tools/commands.h"

namespace deepinfer::cli {
namespace {

struct Options {
    std::string out, preset = "default", config_path, tokenizer_dir;
    uint64_t seed = 0;
    int32_t vocab = 1024;
    double shard_mb = 1024;
};

int run(const Options& o) {
    auto config = tiny::tiny_preset(o.preset);
    if (!config) {
        fmt::print(stderr, "error: {}\n", config.status().message());
        return 2;
    }
    if (!o.config_path.empty()) {
        std::ifstream in(o.config_path);
        if (!in) {
            fmt::print(stderr, "error: --config {}: cannot open\n", o.config_path);
            return 2;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        Status s = model::apply_config_overrides(&*config, ss.str(), o.config_path);
        if (!s.is_ok()) {
            fmt::print(stderr, "error: {}\n", s.message());
            return 2;
        }
    }
    auto assets = o.tokenizer_dir.empty() ? tiny::synthetic_tokenizer_assets(o.vocab)
                                          : tiny::v41_tokenizer_assets(o.tokenizer_dir);
    if (!assets) {
        fmt::print(stderr, "error: {}\n", assets.status().message());
        return 2;
    }
    Status s = tiny::adopt_tokenizer(&*config, *assets);
    if (!s.is_ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 2;
    }
    tiny::TinyOptions opt;
    opt.out_dir = o.out;
    opt.config = *config;
    opt.seed = o.seed;
    opt.tokenizer = std::move(*assets);
    opt.shard_bytes = static_cast<int64_t>(o.shard_mb * 1024 * 1024);
    s = tiny::make_tiny_checkpoint(opt);
    if (!s.is_ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 1;
    }
    return 0;
}

}  // namespace

Command make_make_tiny_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto o = std::make_shared<Options>();
        auto* sub = app.add_subcommand("make-tiny", "Generate a tiny DeepSeek-V4.1 checkpoint in the released layout");
        sub->add_option("--out", o->out, "Output directory")->required();
        sub->add_option("--seed", o->seed, "Seed of the synthetic weights (deterministic)");
        sub->add_option("--preset", o->preset, "default | wide | long | release (released dims, 2 layers)");
        sub->add_option("--config", o->config_path, "JSON file of text_config overrides (dims, layer lists, experts, vocab)");
        sub->add_option("--tokenizer", o->tokenizer_dir,
                        "Directory of a V3-family tokenizer.json: write the V4.1-style tokenizer (129,280 ids) "
                        "instead of the synthetic one");
        const CLI::Option* vocab =
            sub->add_option("--vocab", o->vocab, "Vocabulary size of the synthetic tokenizer (>= 512)");
        sub->add_option("--shard-size", o->shard_mb, "Largest shard in MiB");
        sub->callback([o, exit_code, vocab] {
            if (vocab->count() > 0 && !o->tokenizer_dir.empty()) {  // the V4.1-style tokenizer has its own size
                fmt::print(stderr, "make-tiny: --vocab sizes the synthetic tokenizer; not with --tokenizer (129,280 "
                                   "ids)\n");
                *exit_code = 2;
                return;
            }
            *exit_code = run(*o);
        });
    }};
}

}  // namespace deepinfer::cli
