// The Engram compressed token map (spec §5.5.1, reference engram.py build_compressed_token_map): token ids
// that normalize alike share one compressed id, so n-gram hashes see " The", "the" and "THE" as one token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

// For ids 0..vocab_size-1 in order: decode the id alone (specials kept). If the text contains U+FFFD (a
// partial UTF-8 byte token) its key is the raw token string; otherwise the key is the text after NFKC, NFD,
// removal of combining marks, per-code-point lowercase, collapsing runs of space/tab/CR/LF to one space,
// protecting a lone " " with U+E000, stripping White_Space at both ends and turning U+E000 back into " "
// (HF tokenizers' normalizers, as engram.py builds them); an empty result falls back to the decoded text.
// Equal keys share a class; classes are numbered in order of first appearance. Ids the tokenizer lacks decode
// to "" as in HF. Writes the number of classes to *n_classes (99,092 for the released V4.1 tokenizer).
Expected<std::vector<int32_t>> build_engram_token_map(const Tokenizer& tokenizer, int32_t vocab_size, int32_t* n_classes);

// Hex sha256 of the table as little-endian int32 values (the digest spec §5.5.1 quotes).
std::string token_map_sha256(const std::vector<int32_t>& table);

}  // namespace deepinfer::tokenizer
