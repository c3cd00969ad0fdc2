// `deepinfer engram-map`: the Engram compressed token map (spec §5.5.1) of a tokenizer: class count, sha256
// of the little-endian int32 table, and optionally the table itself (for tests/unit/test_engram_token_map.py).
#include <fmt/format.h>

#include <fstream>

#include "tokenizer/engram_token_map.h"
#include "tools/commands.h"
#include "tools/tokenizer_source.h"

namespace deepinfer::cli {
namespace {

struct EngramMapArgs {
    TokenizerSource source;
    int32_t vocab_size = 0;
    std::string out;
};

Status run(const EngramMapArgs& args) {
    DI_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, load_tokenizer(args.source));
    const int32_t vocab_size = args.vocab_size > 0 ? args.vocab_size : tok.vocab_size();
    int32_t n_classes = 0;
    DI_ASSIGN_OR_RETURN(std::vector<int32_t> table, tokenizer::build_engram_token_map(tok, vocab_size, &n_classes));
    if (!args.out.empty()) {
        std::ofstream out(args.out, std::ios::binary);
        for (int32_t v : table) {
            const auto u = static_cast<uint32_t>(v);
            const char bytes[4] = {static_cast<char>(u), static_cast<char>(u >> 8), static_cast<char>(u >> 16),
                                   static_cast<char>(u >> 24)};
            out.write(bytes, 4);
        }
        out.close();
        if (!out) return Status(StatusCode::kIoError, fmt::format("{}: write failed", args.out));
    }
    fmt::print("{{\"vocab_size\": {}, \"classes\": {}, \"sha256\": \"{}\"}}\n", vocab_size, n_classes,
               tokenizer::token_map_sha256(table));
    return Status::ok();
}

}  // namespace

Command make_engram_map_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto args = std::make_shared<EngramMapArgs>();
        auto* sub = app.add_subcommand("engram-map", "Compute the Engram compressed token map of a tokenizer");
        add_tokenizer_options(sub, args->source);
        sub->add_option("--vocab-size", args->vocab_size, "Number of ids to map (default: the tokenizer's size)");
        sub->add_option("--out", args->out, "Write the table as little-endian int32 to this file");
        sub->callback([args, exit_code] {
            Status s = run(*args);
            if (!s.is_ok()) fmt::print(stderr, "error: {}\n", s.message());
            *exit_code = s.is_ok() ? 0 : 1;
        });
    }};
}

}  // namespace deepinfer::cli
