// Regexes with the matching rules of HF tokenizers, which compiles tokenizer.json patterns with Oniguruma
// (Ruby syntax, UTF-8): patterns are translated to PCRE2 (UTF + UCP, JIT) so that classes, anchors and
// Unicode categories mean what they mean in Oniguruma, and matches are iterated like the onig crate does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

struct MatchSpan {
    uint32_t start = 0;  // byte offsets into the subject
    uint32_t end = 0;
};

// Rewrites an Oniguruma pattern into PCRE2 syntax with the same meaning:
//  - \s \S: White_Space (PCRE2's \s lacks U+0085); \h \H: hex digits (PCRE2: horizontal space);
//    \w \W: Alphabetic + marks + Nd + Pc + join controls (PCRE2 10.42: letters, numbers, '_'); \d: Nd;
//  - \p{X} \P{X} \p{^X} for a general category X: PCRE2's Unicode 14 set plus the code points that
//    Oniguruma (Unicode 16) adds (unicode_delta_table.inc); other properties (scripts, ...) pass through;
//  - \uHHHH -> \x{HHHH}; inline option m (Ruby: dot matches newline) -> s; ^ and $ are line anchors
//    (compiled with PCRE2_MULTILINE, newline LF), as in Ruby syntax.
// Negated items inside a class ([^\S...], [a\W]) become lookaround groups. Nested classes and class
// intersection (&&) have no PCRE2 equivalent and give kUnsupported; so do lone surrogates.
// Known residual differences: \p{C} / \p{Cn} still contain the code points assigned after Unicode 14, and
// U+1171E is Mn in PCRE2 but Mc in Oniguruma.
Expected<std::string> translate_onig_pattern(std::string_view pattern);

class Regex {
   public:
    // Compiles an Oniguruma-syntax pattern (the "Regex" form of tokenizer.json patterns).
    static Expected<Regex> compile(std::string_view onig_pattern);
    // Compiles a pattern matching `text` literally (the "String" form of tokenizer.json patterns).
    static Expected<Regex> compile_literal(std::string_view text);

    // Appends the matches in `subject` (valid UTF-8) to `out` in order. Iteration follows the onig crate's
    // find_iter: each search starts where the previous match ended, and an empty match ending where the
    // previous match ended is skipped by advancing one character. Fails only when PCRE2 gives up (match or
    // JIT stack limits on pathological input); the message names the pattern.
    Status find_all(std::string_view subject, std::vector<MatchSpan>& out) const;

    const std::string& source() const;  // the pattern as given
    const std::string& pcre2_pattern() const;

   private:
    struct Code;
    explicit Regex(std::shared_ptr<const Code> code) : code_(std::move(code)) {}
    std::shared_ptr<const Code> code_;
};

}  // namespace deepinfer::tokenizer
