// Tokenizer selection for CLI subcommands (see tokenizer_source.h).
#include "tools/tokenizer_source.h"

#include <filesystem>

#include "tiny/default_model.h"

namespace deepinfer::cli {

void add_tokenizer_options(CLI::App* sub, TokenizerSource& source) {
    auto* model = sub->add_option("--model", source.model_dir, "Model directory (reads DIR/tokenizer.json; default: the built-in tiny checkpoint)");
    auto* file = sub->add_option("--tokenizer", source.tokenizer_file, "Path of a tokenizer.json");
    model->excludes(file);
    file->excludes(model);
}

Expected<tokenizer::Tokenizer> load_tokenizer(const TokenizerSource& source) {
    if (!source.tokenizer_file.empty()) return tokenizer::Tokenizer::load_file(source.tokenizer_file);
    DI_ASSIGN_OR_RETURN(std::string dir, tiny::resolve_model_dir(source.model_dir));
    return tokenizer::Tokenizer::load_file(std::filesystem::path(dir) / "tokenizer.json");
}

}  // namespace deepinfer::cli
