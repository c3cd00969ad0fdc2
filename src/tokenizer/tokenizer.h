// The tokenizer: loads a HF tokenizer.json of the DeepSeek family (byte-level BPE, spec §8.2) and encodes
// and decodes exactly as HF tokenizers does (tests/unit/test_tokenizer_corpus.py checks that).
//
// Invalid UTF-8: encode() takes bytes. Ill-formed sequences are first replaced by U+FFFD, one per maximal
// subpart (the rule of Python's bytes.decode("utf-8", "replace") and Rust's from_utf8_lossy), so
// encode(b) == HF encode(b.decode("utf-8", "replace")). decode() returns valid UTF-8 the same way
// (HF decode is lossy too); decode_bytes() gives the raw bytes for streaming (see detokenizer.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

class Tokenizer {
   public:
    // Reads and parses a tokenizer.json; errors name the file and the offending field.
    static Expected<Tokenizer> load_file(const std::filesystem::path& path);
    // Parses tokenizer.json text. Supported: model BPE over the ByteLevel alphabet; normalizers of
    // normalizer.h; Split/ByteLevel pre-tokenizers; ByteLevel decoder; ByteLevel/TemplateProcessing
    // post-processors; null truncation and padding. Anything else is kUnsupported, never silently ignored.
    static Expected<Tokenizer> load_json(std::string_view json);

    // Ids of `text`. add_special_tokens applies the post-processor template (HF's flag); DeepSeek's
    // post-processor adds nothing, and our prompt renderer writes BOS as text (spec §8.3).
    Expected<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = false) const;
    // Appends the ids of `text` to `out` (reuses the caller's buffer).
    Status encode_into(std::string_view text, std::vector<int32_t>& out, bool add_special_tokens = false) const;

    // Text of `ids`, valid UTF-8 (ill-formed byte sequences become U+FFFD as in HF). skip_special drops
    // tokens whose content is a special added token. An id with no token is kInvalidArgument.
    Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;
    // Raw bytes of `ids`, appended to `out`, without UTF-8 repair.
    Status decode_bytes(std::span<const int32_t> ids, bool skip_special, std::string& out) const;

    // Id of a token given by its content: added tokens first, then the BPE vocabulary (HF token_to_id).
    std::optional<int32_t> token_id(std::string_view content) const;
    // Token string of an id (byte-level symbols for BPE tokens, content for added tokens), as HF shows it.
    std::optional<std::string_view> id_to_token(int32_t id) const;
    // One past the largest id; ids below it may still be unassigned (has_id).
    int32_t vocab_size() const;
    bool has_id(int32_t id) const;
    // True for special added tokens (skipped by decode(..., skip_special=true)).
    bool is_special(int32_t id) const;
    // Ids of all added tokens, ascending.
    std::vector<int32_t> added_token_ids() const;

    struct Impl;

   private:
    explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    static Expected<Tokenizer> load_json_unchecked(std::string_view json);
    std::shared_ptr<const Impl> impl_;
};

}  // namespace deepinfer::tokenizer
