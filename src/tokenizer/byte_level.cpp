// Byte-level alphabet tables (see byte_level.h); the mapping is openai/gpt-2 encoder.py bytes_to_unicode.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

struct Tables {
    std::array<char32_t, 256> to_char{};
    std::array<int16_t, 0x144> to_byte{};  // every mapped code point is below U+0144
    std::array<std::string, 256> utf8{};
    Tables() {
        to_byte.fill(-1);
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
            to_byte[to_char[b]] = static_cast<int16_t>(b);
            append_utf8(utf8[b], to_char[b]);
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

}  // namespace

char32_t byte_to_char(uint8_t b) { return tables().to_char[b]; }

int char_to_byte(char32_t cp) { return cp < tables().to_byte.size() ? tables().to_byte[cp] : -1; }

std::string bytes_to_symbols(std::string_view bytes) {
    const Tables& t = tables();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) out += t.utf8[static_cast<uint8_t>(c)];
    return out;
}

void symbols_to_bytes(std::string_view token, std::string& out) {
    const size_t start = out.size();
    size_t pos = 0;
    while (pos < token.size()) {
        int b = char_to_byte(next_codepoint(token, pos));
        if (b < 0) {
            out.resize(start);
            out.append(token);
            return;
        }
        out.push_back(static_cast<char>(b));
    }
}

}  // namespace deepinfer::tokenizer
