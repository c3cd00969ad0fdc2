// UTF-8 decoding and lossy repair (see utf8.h).
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

char32_t next_codepoint(std::string_view s, size_t& pos) {
    auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
    uint8_t b0 = byte(pos);
    if (b0 < 0x80) {
        pos += 1;
        return b0;
    }
    if (b0 < 0xE0) {
        char32_t cp = ((b0 & 0x1F) << 6) | (byte(pos + 1) & 0x3F);
        pos += 2;
        return cp;
    }
    if (b0 < 0xF0) {
        char32_t cp = ((b0 & 0x0F) << 12) | ((byte(pos + 1) & 0x3F) << 6) | (byte(pos + 2) & 0x3F);
        pos += 3;
        return cp;
    }
    char32_t cp = ((b0 & 0x07) << 18) | ((byte(pos + 1) & 0x3F) << 12) | ((byte(pos + 2) & 0x3F) << 6) |
                  (byte(pos + 3) & 0x3F);
    pos += 4;
    return cp;
}

size_t utf8_sequence_prefix(std::string_view s, size_t pos, bool* complete) {
    const uint8_t b0 = static_cast<uint8_t>(s[pos]);
    *complete = false;
    if (b0 < 0x80) {
        *complete = true;
        return 1;
    }
    // Allowed range of the second byte depends on the lead (excludes overlongs, surrogates, > U+10FFFF);
    // later bytes are always 80..BF. Leads C0, C1, F5..FF and stray continuation bytes start nothing.
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    size_t len = 1;
    while (len < need && pos + len < s.size()) {
        const uint8_t b = static_cast<uint8_t>(s[pos + len]);
        if (len == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return len;
        ++len;
    }
    *complete = len == need;
    return len;
}

bool is_valid_utf8(std::string_view s) {
    size_t pos = 0;
    while (pos < s.size()) {
        // ASCII fast path, 8 bytes at a time.
        while (pos + 8 <= s.size()) {
            uint64_t word;
            __builtin_memcpy(&word, s.data() + pos, 8);
            if (word & 0x8080808080808080ull) break;
            pos += 8;
        }
        if (pos >= s.size()) break;
        bool complete;
        size_t len = utf8_sequence_prefix(s, pos, &complete);
        if (!complete) return false;
        pos += len;
    }
    return true;
}

std::string utf8_lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() + 8);
    size_t pos = 0;
    while (pos < bytes.size()) {
        bool complete;
        size_t len = utf8_sequence_prefix(bytes, pos, &complete);
        if (complete) {
            out.append(bytes.data() + pos, len);
            pos += len;
        } else {
            append_utf8(out, kReplacementChar);
            pos += len == 0 ? 1 : len;
        }
    }
    return out;
}

size_t utf8_stable_prefix(std::string_view bytes) {
    // A held-back tail starts at a lead byte within the last 3 bytes whose sequence is a valid, incomplete
    // prefix running to the end. Bytes before a lead byte never join a sequence starting at or after it.
    const size_t n = bytes.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const size_t pos = n - back;
        const uint8_t b = static_cast<uint8_t>(bytes[pos]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        bool complete;
        size_t len = utf8_sequence_prefix(bytes, pos, &complete);
        return (!complete && len == back) ? pos : n;
    }
    return n;
}

}  // namespace deepinfer::tokenizer
