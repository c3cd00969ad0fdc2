// HF normalizers (see normalizer.h). Semantics follow tokenizers' Rust code, not ICU's or Python's defaults:
//  - Lowercase maps each code point on its own (Rust char::to_lowercase: full mapping, no Final_Sigma
//    context, so "ΑΣ" -> "ασ" where Python's str.lower() gives "ας"), from a table measured on HF
//    (hf_lowercase.inc, Unicode 16; ICU 72 is Unicode 15);
//  - StripAccents removes the code points HF's combining-mark table lists (hf_combining_marks.inc; that
//    table predates Unicode 11, so newer marks such as U+07FD stay);
//  - Strip trims White_Space code points (Rust char::is_whitespace), via ICU;
//  - NFC/NFD/NFKC/NFKD use ICU 72 (Unicode 15). HF's unicode-normalization-alignments tables are older
//    (Unicode 12): the ~100 code points whose decompositions were added since (e.g. U+32FF, U+A7F2,
//    U+10781..) are normalized here but left alone by HF. Not exact for those; exact elsewhere;
//  - Replace patterns are Oniguruma regexes (or literal strings) matched like the onig crate.
#include "tokenizer/normalizer.h"

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <variant>

#include "tokenizer/onig_regex.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

namespace {

struct LowercaseEntry {
    char32_t cp;
    const char32_t* lower;
};
constexpr LowercaseEntry kHfLowercase[] = {
#include "tokenizer/hf_lowercase.inc"
};

struct CodepointRange {
    char32_t first, last;
};
constexpr CodepointRange kHfCombiningMarks[] = {
#include "tokenizer/hf_combining_marks.inc"
};

bool is_hf_combining_mark(char32_t cp) {
    auto it = std::upper_bound(std::begin(kHfCombiningMarks), std::end(kHfCombiningMarks), cp,
                               [](char32_t c, const CodepointRange& r) { return c < r.first; });
    return it != std::begin(kHfCombiningMarks) && cp <= std::prev(it)->last;
}

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

struct NormalizeStep {
    const icu::Normalizer2* normalizer;
};
struct LowercaseStep {};
struct StripAccentsStep {};
struct StripStep {
    bool left, right;
};
struct ReplaceStep {
    Regex regex;
    std::string content;
};
struct PrependStep {
    std::string prefix;
};

Status apply(const NormalizeStep& s, std::string& text) {
    UErrorCode status = U_ZERO_ERROR;
    std::string out;
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
    s.normalizer->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr,
                                status);
    if (U_FAILURE(status)) return Status(StatusCode::kInternal, fmt::format("ICU normalization failed: {}", u_errorName(status)));
    text.swap(out);
    return Status::ok();
}

Status apply(const LowercaseStep&, std::string& text) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        const char32_t cp = next_codepoint(text, pos);
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
            continue;
        }
        auto it = std::lower_bound(std::begin(kHfLowercase), std::end(kHfLowercase), cp,
                                   [](const LowercaseEntry& e, char32_t c) { return e.cp < c; });
        if (it != std::end(kHfLowercase) && it->cp == cp) {
            for (const char32_t* c = it->lower; *c; ++c) append_utf8(out, *c);
        } else {
            append_utf8(out, cp);
        }
    }
    text.swap(out);
    return Status::ok();
}

Status apply(const StripAccentsStep&, std::string& text) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        size_t start = pos;
        char32_t cp = next_codepoint(text, pos);
        if (!is_hf_combining_mark(cp)) out.append(text, start, pos - start);
    }
    text.swap(out);
    return Status::ok();
}

Status apply(const StripStep& s, std::string& text) {
    size_t begin = 0, end = text.size();
    if (s.left) {
        while (begin < end) {
            size_t pos = begin;
            if (!u_isUWhiteSpace(static_cast<UChar32>(next_codepoint(text, pos)))) break;
            begin = pos;
        }
    }
    if (s.right) {
        while (end > begin) {
            size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
            size_t pos = start;
            if (!u_isUWhiteSpace(static_cast<UChar32>(next_codepoint(text, pos)))) break;
            end = start;
        }
    }
    text = text.substr(begin, end - begin);
    return Status::ok();
}

Status apply(const ReplaceStep& s, std::string& text) {
    std::vector<MatchSpan> matches;
    DI_RETURN_IF_ERROR(s.regex.find_all(text, matches));
    if (matches.empty()) return Status::ok();
    std::string out;
    size_t prev = 0;
    for (const MatchSpan& m : matches) {
        out.append(text, prev, m.start - prev);
        out += s.content;
        prev = m.end;
    }
    out.append(text, prev, std::string::npos);
    text.swap(out);
    return Status::ok();
}

Status apply(const PrependStep& s, std::string& text) {
    if (!text.empty()) text.insert(0, s.prefix);
    return Status::ok();
}

Expected<const icu::Normalizer2*> icu_normalizer(UnicodeForm form) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = nullptr;
    switch (form) {
        case UnicodeForm::kNfc: n = icu::Normalizer2::getNFCInstance(status); break;
        case UnicodeForm::kNfd: n = icu::Normalizer2::getNFDInstance(status); break;
        case UnicodeForm::kNfkc: n = icu::Normalizer2::getNFKCInstance(status); break;
        case UnicodeForm::kNfkd: n = icu::Normalizer2::getNFKDInstance(status); break;
    }
    if (U_FAILURE(status) || !n) return Status(StatusCode::kInternal, fmt::format("ICU normalizer unavailable: {}", u_errorName(status)));
    return n;
}

Expected<std::string> string_field(const nlohmann::json& spec, const char* key, const std::string& where) {
    auto it = spec.find(key);
    if (it == spec.end() || !it->is_string()) return corrupt("{}: field \"{}\" must be a string", where, key);
    return it->get<std::string>();
}

}  // namespace

struct Normalizer::Step {
    std::variant<NormalizeStep, LowercaseStep, StripAccentsStep, StripStep, ReplaceStep, PrependStep> op;
};

namespace {

Status parse_into(const nlohmann::json& spec, std::vector<std::shared_ptr<const Normalizer::Step>>& steps) {
    if (spec.is_null()) return Status::ok();
    if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
        return corrupt("normalizer: expected an object with a string \"type\", got {}", spec.dump().substr(0, 80));
    }
    const std::string type = spec["type"].get<std::string>();
    const std::string where = "normalizer " + type;
    auto add = [&](auto op) { steps.push_back(std::make_shared<Normalizer::Step>(Normalizer::Step{std::move(op)})); };
    if (type == "Sequence") {
        auto it = spec.find("normalizers");
        if (it == spec.end() || !it->is_array()) return corrupt("normalizer Sequence: \"normalizers\" must be an array");
        for (const auto& child : *it) DI_RETURN_IF_ERROR(parse_into(child, steps));
    } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
        UnicodeForm form = type == "NFC" ? UnicodeForm::kNfc : type == "NFD" ? UnicodeForm::kNfd
                           : type == "NFKC" ? UnicodeForm::kNfkc : UnicodeForm::kNfkd;
        DI_ASSIGN_OR_RETURN(const icu::Normalizer2* n, icu_normalizer(form));
        add(NormalizeStep{n});
    } else if (type == "Lowercase") {
        add(LowercaseStep{});
    } else if (type == "StripAccents") {
        add(StripAccentsStep{});
    } else if (type == "Strip") {
        add(StripStep{spec.value("strip_left", true), spec.value("strip_right", true)});
    } else if (type == "Replace") {
        DI_ASSIGN_OR_RETURN(std::string content, string_field(spec, "content", where));
        auto pattern = spec.find("pattern");
        if (pattern == spec.end() || !pattern->is_object()) return corrupt("{}: \"pattern\" must be an object", where);
        Expected<Regex> regex = Status(StatusCode::kCorrupt, where + ": \"pattern\" needs a \"String\" or \"Regex\" string");
        if (pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
            regex = Regex::compile((*pattern)["Regex"].get<std::string>());
        } else if (pattern->contains("String") && (*pattern)["String"].is_string()) {
            regex = Regex::compile_literal((*pattern)["String"].get<std::string>());
        }
        if (!regex) return regex.status().with_context(where);
        add(ReplaceStep{std::move(regex).value(), std::move(content)});
    } else if (type == "Prepend") {
        DI_ASSIGN_OR_RETURN(std::string prefix, string_field(spec, "prepend", where));
        add(PrependStep{std::move(prefix)});
    } else {
        return error(StatusCode::kUnsupported,
                     "normalizer type \"{}\" is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, "
                     "StripAccents, Strip, Replace, Prepend)", type);
    }
    return Status::ok();
}

}  // namespace

Expected<Normalizer> Normalizer::from_json(const nlohmann::json& spec) {
    Normalizer n;
    DI_RETURN_IF_ERROR(parse_into(spec, n.steps_));
    return n;
}

Status Normalizer::normalize(std::string& text) const {
    for (const auto& step : steps_) {
        DI_RETURN_IF_ERROR(std::visit([&](const auto& op) { return apply(op, text); }, step->op));
    }
    return Status::ok();
}

}  // namespace deepinfer::tokenizer
