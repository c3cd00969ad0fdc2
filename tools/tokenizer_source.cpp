// Tokenizer selection for CLI subcommands (see tokenizer_source.h).
#include "tools/tokenizer_source.h"

#include <filesystem>

namespace deepinfer::cli {

void add_tokenizer_options(CLI::App* sub, TokenizerSource& source) {
    auto* model = sub->add_option("--model", source.model_dir, "Model directory (reads DIR/tokenizer.json)");
    auto* file = sub->add_option("--tokenizer", source.tokenizer_file, "Path of a tokenizer.json");
    model->excludes(file);
    file->excludes(model);
}

Expected<tokenizer::Tokenizer> load_tokenizer(const TokenizerSource& source) {
    if (!source.tokenizer_file.empty()) return tokenizer::Tokenizer::load_file(source.tokenizer_file);
    if (!source.model_dir.empty()) {
        return tokenizer::Tokenizer::load_file(std::filesystem::path(source.model_dir) / "tokenizer.json");
    }
    return invalid_argument("one of --model DIR or --tokenizer FILE is required");
}

}  // namespace deepinfer::cli
