// `deepinfer make-tokenizer`: writes a generated tokenizer.json + tokenizer_config.json into a directory:
// the synthetic tokenizer of the built-in tiny checkpoint, or the V4.1-style file made from a V3-family one.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer/v41_tokenizer.h"
#include "tools/commands.h"

namespace deepinfer::cli {
namespace {

struct MakeTokenizerArgs {
    std::string kind;
    std::string from;
    std::string out_dir;
    int32_t vocab_size = tokenizer::kDefaultSyntheticVocabSize;
};

Status write_file(const std::filesystem::path& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary);
    out << content;
    out.close();
    if (!out) return Status(StatusCode::kIoError, fmt::format("{}: write failed", path.string()));
    return Status::ok();
}

Status run(const MakeTokenizerArgs& args) {
    std::string json, config;
    if (args.kind == "synthetic") {
        DI_ASSIGN_OR_RETURN(json, tokenizer::make_synthetic_tokenizer_json(args.vocab_size));
        config = tokenizer::make_synthetic_tokenizer_config_json();
    } else if (args.kind == "v41") {
        if (args.from.empty()) return invalid_argument("--kind v41 needs --from <V3-family tokenizer.json>");
        std::ifstream in(args.from, std::ios::binary);
        if (!in) return Status(StatusCode::kNotFound, fmt::format("{}: cannot open", args.from));
        std::ostringstream buffer;
        buffer << in.rdbuf();
        Expected<std::string> made = tokenizer::make_v41_tokenizer_json(buffer.str());
        if (!made) return made.status().with_context(args.from);
        json = std::move(made).value();
        config = tokenizer::make_v41_tokenizer_config_json();
    } else {
        return invalid_argument("--kind must be \"synthetic\" or \"v41\", got \"{}\"", args.kind);
    }
    std::error_code ec;
    std::filesystem::create_directories(args.out_dir, ec);
    if (ec) return Status(StatusCode::kIoError, fmt::format("{}: {}", args.out_dir, ec.message()));
    const std::filesystem::path dir(args.out_dir);
    DI_RETURN_IF_ERROR(write_file(dir / "tokenizer.json", json));
    DI_RETURN_IF_ERROR(write_file(dir / "tokenizer_config.json", config));
    fmt::print("wrote {} and {}\n", (dir / "tokenizer.json").string(), (dir / "tokenizer_config.json").string());
    return Status::ok();
}

}  // namespace

Command make_make_tokenizer_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto args = std::make_shared<MakeTokenizerArgs>();
        auto* sub = app.add_subcommand("make-tokenizer", "Write a generated tokenizer.json and tokenizer_config.json");
        sub->add_option("--kind", args->kind, "synthetic (built-in tiny tokenizer) or v41 (V4.1-style from a V3 file)")
            ->required();
        const CLI::Option* from = sub->add_option("--from", args->from, "V3-family tokenizer.json (for --kind v41)");
        const CLI::Option* vocab =
            sub->add_option("--vocab-size", args->vocab_size, "Vocabulary size (for --kind synthetic)");
        sub->add_option("--out", args->out_dir, "Output directory")->required();
        sub->callback([args, exit_code, from, vocab] {
            // each kind reads one of the two; the other, given, would be dropped
            const CLI::Option* unread = args->kind == "synthetic" ? from : args->kind == "v41" ? vocab : nullptr;
            if (unread && unread->count() > 0) {
                fmt::print(stderr, "make-tokenizer: --kind {} does not read {}\n", args->kind,
                           given_option_names({unread}));
                *exit_code = 2;
                return;
            }
            Status s = run(*args);
            if (!s.is_ok()) fmt::print(stderr, "error: {}\n", s.message());
            *exit_code = s.is_ok() ? 0 : 1;
        });
    }};
}

}  // namespace deepinfer::cli
