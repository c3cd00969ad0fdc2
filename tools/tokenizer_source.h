// CLI options that choose a tokenizer: --model DIR (reads DIR/tokenizer.json) or --tokenizer FILE.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

struct TokenizerSource {
    std::string model_dir;
    std::string tokenizer_file;
};

// Adds the two mutually exclusive options to `sub`; with neither, the built-in tiny checkpoint's tokenizer.
void add_tokenizer_options(CLI::App* sub, TokenizerSource& source);

Expected<tokenizer::Tokenizer> load_tokenizer(const TokenizerSource& source);

}  // namespace deepinfer::cli
