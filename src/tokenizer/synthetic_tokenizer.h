// A synthetic DeepSeek-style tokenizer for the built-in tiny checkpoint: needs no file from outside the
// repository, loads in HF tokenizers, and has the same normalizer / pre-tokenizer / decoder structure as
// DeepSeek's tokenizer.json (spec §8.2), with a small vocabulary learned from synthetic_training_text().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::tokenizer {

inline constexpr int32_t kDefaultSyntheticVocabSize = 1024;
// BOS/EOS/PAD + 256 byte symbols + the protocol tokens of protocol_tokens.h.
inline constexpr int32_t kMinSyntheticVocabSize = 3 + 256 + 15;

// tokenizer.json text. Layout: ids 0, 1, 2 = BOS, EOS, PAD (in the BPE vocabulary and added as special
// tokens, as in DeepSeek's file); 3..258 = the 256 byte-level symbols in GPT-2 order; then the tokens of
// merges learned by train_bpe() over the training text; the protocol tokens (protocol_tokens.h, release
// flags) take the top ids. If the text cannot supply enough merges, the ids between the last learned token
// and the protocol tokens become special "<｜place▁holder▁no▁N｜>" tokens. Deterministic for a vocab_size.
Expected<std::string> make_synthetic_tokenizer_json(int32_t vocab_size = kDefaultSyntheticVocabSize);

// tokenizer_config.json for it: the same content as the V4.1 release's (add_bos_token false, pad = eos).
std::string make_synthetic_tokenizer_config_json();

// The built-in training text (English prose and code, a few KB; synthetic_corpus.cpp).
std::string_view synthetic_training_text();

// DeepSeek's pre_tokenizer value of tokenizer.json (three Split regexes, then ByteLevel without regex).
std::string deepseek_pre_tokenizer_json();

}  // namespace deepinfer::tokenizer
