// `make-tiny`: a complete V4.1 checkpoint in the released layout (names, storage dtypes, nested
// config.json, tokenizer files), deterministic for a seed, with weight statistics following the
// release (spec Appendix B) so activations stay in a realistic range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace deepinfer::tiny {

// The tokenizer files written beside the weights and what the config takes from them.
struct TokenizerAssets {
    std::string tokenizer_json;
    std::string tokenizer_config_json;
    int32_t vocab_size = 0;
    std::vector<int32_t> engram_token_map;  // compressed class of every token id (spec §5.5.1)
    int32_t n_engram_classes = 0;
    int32_t bos_id = 0, eos_id = 1, pad_id = 2;
    int32_t noise_token_id = 0;             // <｜System｜>, the DSpark noise token
};

struct TinyOptions {
    std::string out_dir;
    model::ModelConfig config;      // from a preset, with overrides applied
    uint64_t seed = 0;
    TokenizerAssets tokenizer;
    int64_t shard_bytes = int64_t{1} << 30;  // split into model-0000i-of-0000n.safetensors above this
    bool progress = true;
};

// Takes vocab size, special ids and the Engram class count from the tokenizer into the config.
Status adopt_tokenizer(model::ModelConfig* config, const TokenizerAssets& tokenizer);
Status make_tiny_checkpoint(const TinyOptions& options);

}  // namespace deepinfer::tiny
