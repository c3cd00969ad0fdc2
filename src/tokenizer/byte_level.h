// The GPT-2 byte-level alphabet used by HF `ByteLevel` pre-tokenizer and decoder: every byte maps to one
// printable code point (printable Latin-1 bytes to themselves, the other 68 bytes to U+0100..U+0143).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// Code point that stands for byte `b` in byte-level token strings.
char32_t byte_to_char(uint8_t b);

// Byte that code point `cp` stands for, or -1 when `cp` is not in the byte-level alphabet.
int char_to_byte(char32_t cp);

// UTF-8 string of the byte-level symbols of `bytes` (what HF shows as a token string, e.g. "Ġworld").
std::string bytes_to_symbols(std::string_view bytes);

// Inverse of bytes_to_symbols, following HF's ByteLevel decoder per token: when every character of `token`
// is in the alphabet its bytes are appended; otherwise the token's own UTF-8 bytes are (added tokens such as
// "<｜User｜>"). `token` must be valid UTF-8.
void symbols_to_bytes(std::string_view token, std::string& out);

}  // namespace deepinfer::tokenizer
