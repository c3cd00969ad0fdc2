// Tokenizer files for generated checkpoints: the synthetic in-repository tokenizer (default), or a
// V4.1-style tokenizer built from a V3-family tokenizer.json (e.g. ../shared/data/deepseek-v3-tokenizer),
// with the Engram token map and special ids the config takes from them.
#pragma once

#include <string>

#include "core/status.h"
#include "tiny/generator.h"

namespace deepinfer::tiny {

Expected<TokenizerAssets> synthetic_tokenizer_assets(int32_t vocab_size);
Expected<TokenizerAssets> v41_tokenizer_assets(const std::string& v3_tokenizer_dir);
// Any tokenizer.json (+ tokenizer_config.json text): parse, find the special ids, compute the token map.
Expected<TokenizerAssets> tokenizer_assets_from_json(std::string tokenizer_json, std::string tokenizer_config_json,
                                                     const std::string& source);

}  // namespace deepinfer::tiny
