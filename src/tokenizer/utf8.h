// UTF-8 primitives shared by the tokenizer: strict decoding, encoding, and the lossy repair rule that both
// HF tokenizers (Rust String::from_utf8_lossy) and Python (bytes.decode("utf-8", "replace")) apply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cp` (must be a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t cp);

// Decodes the scalar value starting at `s[pos]` of a string known to be valid UTF-8 and advances `pos`.
char32_t next_codepoint(std::string_view s, size_t& pos);

// Length of the longest prefix of `s[pos..]` that is a valid (possibly incomplete) start of one UTF-8 encoded
// scalar value, following the Unicode "maximal subpart" rule (Unicode §3.9, table 3-7): 0 when s[pos] can
// never start a sequence. `complete` tells whether that prefix is a whole scalar value.
size_t utf8_sequence_prefix(std::string_view s, size_t pos, bool* complete);

bool is_valid_utf8(std::string_view s);

// Replaces every ill-formed maximal subpart by one U+FFFD; a valid input is returned unchanged. This is the
// rule of Rust's from_utf8_lossy and of Python's errors="replace", so text repaired here equals the str that
// Python hands to HF tokenizers for the same bytes.
std::string utf8_lossy(std::string_view bytes);

// Number of leading bytes of `bytes` whose lossy decoding cannot change whatever bytes follow: everything
// except a trailing sequence that is a valid but incomplete start of a scalar value (at most 3 bytes).
size_t utf8_stable_prefix(std::string_view bytes);

}  // namespace deepinfer::tokenizer
