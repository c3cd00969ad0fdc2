// Oniguruma-to-PCRE2 pattern translation and JIT matching (see onig_regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/onig_regex.h"

#include <fmt/format.h>
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>

namespace deepinfer::tokenizer {
namespace {

struct DeltaRange {
    const char* category;
    char32_t first;
    char32_t last;
};

constexpr DeltaRange kDeltaRanges[] = {
#include "tokenizer/unicode_delta_table.inc"
};

// Oniguruma's White_Space set: \s in Ruby syntax with UTF-8. Written with escapes so it survives (?x).
constexpr const char* kWhiteSpaceItems =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
constexpr const char* kHexItems = "0-9a-fA-F";

// Canonical short name of a general category given in any of Oniguruma's spellings, or nullopt.
std::optional<std::string> canonical_category(std::string_view name) {
    std::string key;
    for (char c : name) {
        if (c == ' ' || c == '_' || c == '-') continue;
        key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    static const std::map<std::string, std::string> kNames = {
        {"l", "L"}, {"letter", "L"}, {"lc", "LC"}, {"l&", "LC"}, {"casedletter", "LC"},
        {"lu", "Lu"}, {"uppercaseletter", "Lu"}, {"ll", "Ll"}, {"lowercaseletter", "Ll"},
        {"lt", "Lt"}, {"titlecaseletter", "Lt"}, {"lm", "Lm"}, {"modifierletter", "Lm"},
        {"lo", "Lo"}, {"otherletter", "Lo"}, {"m", "M"}, {"mark", "M"}, {"combiningmark", "M"},
        {"mn", "Mn"}, {"nonspacingmark", "Mn"}, {"mc", "Mc"}, {"spacingmark", "Mc"},
        {"me", "Me"}, {"enclosingmark", "Me"}, {"n", "N"}, {"number", "N"},
        {"nd", "Nd"}, {"decimalnumber", "Nd"}, {"nl", "Nl"}, {"letternumber", "Nl"},
        {"no", "No"}, {"othernumber", "No"}, {"p", "P"}, {"punctuation", "P"},
        {"pc", "Pc"}, {"connectorpunctuation", "Pc"}, {"pd", "Pd"}, {"dashpunctuation", "Pd"},
        {"ps", "Ps"}, {"openpunctuation", "Ps"}, {"pe", "Pe"}, {"closepunctuation", "Pe"},
        {"pi", "Pi"}, {"initialpunctuation", "Pi"}, {"pf", "Pf"}, {"finalpunctuation", "Pf"},
        {"po", "Po"}, {"otherpunctuation", "Po"}, {"s", "S"}, {"symbol", "S"},
        {"sm", "Sm"}, {"mathsymbol", "Sm"}, {"sc", "Sc"}, {"currencysymbol", "Sc"},
        {"sk", "Sk"}, {"modifiersymbol", "Sk"}, {"so", "So"}, {"othersymbol", "So"},
        {"z", "Z"}, {"separator", "Z"}, {"zs", "Zs"}, {"spaceseparator", "Zs"},
        {"zl", "Zl"}, {"lineseparator", "Zl"}, {"zp", "Zp"}, {"paragraphseparator", "Zp"},
        {"c", "C"}, {"other", "C"}, {"cc", "Cc"}, {"control", "Cc"}, {"cf", "Cf"}, {"format", "Cf"},
        {"co", "Co"}, {"privateuse", "Co"}, {"cs", "Cs"}, {"surrogate", "Cs"},
        {"cn", "Cn"}, {"unassigned", "Cn"},
    };
    auto it = kNames.find(key);
    if (it == kNames.end()) return std::nullopt;
    return it->second;
}

bool category_contains(const std::string& category, const char* sub) {
    if (category == "LC") return sub == std::string_view("Lu") || sub == std::string_view("Ll") ||
                                 sub == std::string_view("Lt");
    if (category.size() == 1) return sub[0] == category[0];
    return category == sub;
}

// Class items for a general category: PCRE2's own property plus the Oniguruma-only code points.
std::string category_items(const std::string& category) {
    std::string items = category == "LC" ? "\\p{Lu}\\p{Ll}\\p{Lt}" : "\\p{" + category + "}";
    for (const auto& r : kDeltaRanges) {
        if (!category_contains(category, r.category)) continue;
        items += fmt::format("\\x{{{:X}}}", static_cast<uint32_t>(r.first));
        if (r.last != r.first) items += fmt::format("-\\x{{{:X}}}", static_cast<uint32_t>(r.last));
    }
    return items;
}

// Oniguruma's \w: Alphabetic, marks, decimal numbers, connector punctuation and the join controls.
std::string word_items() {
    std::string items = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";
    for (const char* cat : {"L", "M", "Nd", "Nl"}) {
        std::string extra = category_items(cat);
        items += extra.substr(extra.find('}') + 1);  // the delta ranges only
    }
    return items;
}

// One translated escape: class items, and whether the escape is the complement of those items.
struct EscapeItems {
    std::string items;
    bool negated = false;
};

class Translator {
   public:
    explicit Translator(std::string_view pattern) : p_(pattern) {}

    Expected<std::string> run() {
        while (i_ < p_.size()) {
            char c = p_[i_];
            if (c == '\\') {
                DI_RETURN_IF_ERROR(escape_outside());
            } else if (c == '[') {
                DI_RETURN_IF_ERROR(character_class());
            } else if (c == '(' && i_ + 1 < p_.size() && p_[i_ + 1] == '?') {
                options_group();
            } else {
                out_.push_back(c);
                ++i_;
            }
        }
        return out_;
    }

   private:
    Status error(std::string_view what) const {
        return Status(StatusCode::kUnsupported,
                      fmt::format("regex \"{}\": {} at byte {} (no PCRE2 equivalent)", p_, what, i_));
    }

    // Parses the escape at p_[i_] (a backslash). Returns nullopt for escapes copied verbatim.
    Expected<std::optional<EscapeItems>> special_escape() {
        if (i_ + 1 >= p_.size()) return Status(StatusCode::kInvalidArgument, fmt::format("regex \"{}\": trailing backslash", p_));
        const char e = p_[i_ + 1];
        switch (e) {
            case 's': case 'S': i_ += 2; return std::optional<EscapeItems>({kWhiteSpaceItems, e == 'S'});
            case 'h': case 'H': i_ += 2; return std::optional<EscapeItems>({kHexItems, e == 'H'});
            case 'd': case 'D': i_ += 2; return std::optional<EscapeItems>({category_items("Nd"), e == 'D'});
            case 'w': case 'W': i_ += 2; return std::optional<EscapeItems>({word_items(), e == 'W'});
            case 'p': case 'P': {
                if (i_ + 2 >= p_.size() || p_[i_ + 2] != '{') return std::optional<EscapeItems>();
                size_t close = p_.find('}', i_ + 3);
                if (close == std::string_view::npos) return std::optional<EscapeItems>();
                std::string_view name = p_.substr(i_ + 3, close - (i_ + 3));
                bool negated = e == 'P';
                if (!name.empty() && name[0] == '^') {
                    negated = !negated;
                    name.remove_prefix(1);
                }
                auto category = canonical_category(name);
                if (!category) return std::optional<EscapeItems>();  // script or binary property
                i_ = close + 1;
                return std::optional<EscapeItems>({category_items(*category), negated});
            }
            default: return std::optional<EscapeItems>();
        }
    }

    // Copies a verbatim escape (backslash + one UTF-8 character), translating \uHHHH.
    void copy_escape() {
        if (p_[i_ + 1] == 'u' && i_ + 6 <= p_.size() &&
            std::all_of(p_.begin() + i_ + 2, p_.begin() + i_ + 6, [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
            out_ += fmt::format("\\x{{{}}}", p_.substr(i_ + 2, 4));
            i_ += 6;
            return;
        }
        out_.push_back('\\');
        ++i_;
        copy_char();
    }

    void copy_char() {
        const unsigned char lead = static_cast<unsigned char>(p_[i_]);
        size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
        len = std::min(len, p_.size() - i_);
        out_.append(p_.substr(i_, len));
        i_ += len;
    }

    Status escape_outside() {
        DI_ASSIGN_OR_RETURN(std::optional<EscapeItems> items, special_escape());
        if (!items) {
            copy_escape();
            return Status::ok();
        }
        out_ += items->negated ? "[^" : "[";
        out_ += items->items;
        out_ += "]";
        return Status::ok();
    }

    // Inline options: Ruby's (?m) is dotall, PCRE2's is (?s).
    void options_group() {
        size_t j = i_ + 2;
        while (j < p_.size() && (p_[j] == 'i' || p_[j] == 'm' || p_[j] == 'x' || p_[j] == '-')) ++j;
        if (j == i_ + 2 || j >= p_.size() || (p_[j] != ')' && p_[j] != ':')) {
            out_ += "(?";
            i_ += 2;
            return;
        }
        out_ += "(?";
        for (size_t k = i_ + 2; k < j; ++k) out_.push_back(p_[k] == 'm' ? 's' : p_[k]);
        i_ = j;
    }

    Status character_class() {
        ++i_;  // '['
        bool negated = false;
        if (i_ < p_.size() && p_[i_] == '^') {
            negated = true;
            ++i_;
        }
        std::string positive;
        std::vector<std::string> complements;  // items whose complement belongs to the class
        std::string saved;
        saved.swap(out_);
        if (i_ < p_.size() && p_[i_] == ']') {  // a leading ']' is literal
            out_ += "\\]";
            ++i_;
        }
        bool closed = false;
        while (i_ < p_.size()) {
            char c = p_[i_];
            if (c == ']') {
                closed = true;
                ++i_;
                break;
            }
            if (c == '[') {
                if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
                    size_t end = p_.find(":]", i_ + 2);
                    if (end == std::string_view::npos) return error("unterminated POSIX class");
                    out_.append(p_.substr(i_, end + 2 - i_));
                    i_ = end + 2;
                    continue;
                }
                return error("nested character class");
            }
            if (c == '&' && i_ + 1 < p_.size() && p_[i_ + 1] == '&') return error("class intersection '&&'");
            if (c == '\\') {
                DI_ASSIGN_OR_RETURN(std::optional<EscapeItems> items, special_escape());
                if (!items) {
                    copy_escape();
                } else if (items->negated) {
                    complements.push_back(std::move(items->items));
                } else {
                    out_ += items->items;
                }
                continue;
            }
            copy_char();
        }
        if (!closed) return Status(StatusCode::kInvalidArgument, fmt::format("regex \"{}\": unterminated character class", p_));
        positive.swap(out_);
        out_.swap(saved);
        if (complements.empty()) {
            out_ += negated ? "[^" : "[";
            out_ += positive.empty() ? (negated ? "\\x{0}-\\x{10FFFF}" : "") : positive;
            out_ += "]";
            if (positive.empty() && !negated) out_ += "(?!)";  // an empty class never matches
            return Status::ok();
        }
        if (!negated) {  // positive items, or any character outside one of the complemented sets
            out_ += "(?:";
            if (!positive.empty()) out_ += "[" + positive + "]|";
            for (size_t k = 0; k < complements.size(); ++k) out_ += (k ? "|[^" : "[^") + complements[k] + "]";
            out_ += ")";
        } else {  // not a positive item, and inside every complemented set
            out_ += "(?:";
            if (!positive.empty()) out_ += "(?![" + positive + "])";
            for (size_t k = 0; k + 1 < complements.size(); ++k) out_ += "(?=[" + complements[k] + "])";
            out_ += "[" + complements.back() + "])";
        }
        return Status::ok();
    }

    std::string_view p_;
    size_t i_ = 0;
    std::string out_;
};

// Per-thread match scratch: match data and a JIT stack big enough for long runs of one class.
struct ThreadScratch {
    pcre2_match_data* data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;
    ThreadScratch() {
        data = pcre2_match_data_create(16, nullptr);
        context = pcre2_match_context_create(nullptr);
        jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
        if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
    ~ThreadScratch() {
        pcre2_jit_stack_free(jit_stack);
        pcre2_match_context_free(context);
        pcre2_match_data_free(data);
    }
};

ThreadScratch& scratch() {
    thread_local ThreadScratch s;
    return s;
}

std::string pcre2_error_text(int code) {
    std::array<PCRE2_UCHAR, 256> buffer{};
    pcre2_get_error_message(code, buffer.data(), buffer.size());
    return reinterpret_cast<const char*>(buffer.data());
}

}  // namespace

struct Regex::Code {
    std::string source;
    std::string pattern;
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Code() { pcre2_code_free(code); }
};

Expected<std::string> translate_onig_pattern(std::string_view pattern) { return Translator(pattern).run(); }

Expected<Regex> Regex::compile(std::string_view onig_pattern) {
    DI_ASSIGN_OR_RETURN(std::string pattern, translate_onig_pattern(onig_pattern));
    auto code = std::make_shared<Code>();
    code->source = std::string(onig_pattern);
    code->pattern = std::move(pattern);
    pcre2_compile_context* ccontext = pcre2_compile_context_create(nullptr);
    pcre2_set_newline(ccontext, PCRE2_NEWLINE_LF);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(code->pattern.data()), code->pattern.size(),
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error_code, &error_offset, ccontext);
    pcre2_compile_context_free(ccontext);
    if (!code->code) {
        return Status(StatusCode::kInvalidArgument,
                      fmt::format("regex \"{}\" does not compile: {} (at offset {} of PCRE2 pattern \"{}\")",
                                  onig_pattern, pcre2_error_text(error_code), error_offset, code->pattern));
    }
    code->jit = pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE) == 0;
    return Regex(std::move(code));
}

Expected<Regex> Regex::compile_literal(std::string_view text) {
    std::string escaped;
    for (char c : text) {
        if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c))) escaped.push_back('\\');
        escaped.push_back(c);
    }
    // The escaped text has no Oniguruma-specific constructs left, so translation is the identity.
    return compile(escaped);
}

const std::string& Regex::source() const { return code_->source; }
const std::string& Regex::pcre2_pattern() const { return code_->pattern; }

Status Regex::find_all(std::string_view subject, std::vector<MatchSpan>& out) const {
    ThreadScratch& s = scratch();
    if (!s.data || !s.context || !s.jit_stack) return Status(StatusCode::kResourceExhausted, "regex: out of memory for match data");
    const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
    const size_t n = subject.size();
    size_t search_from = 0;
    size_t last_match_end = SIZE_MAX;
    while (search_from <= n) {
        int rc = code_->jit ? pcre2_jit_match(code_->code, text, n, search_from, 0, s.data, s.context)
                            : pcre2_match(code_->code, text, n, search_from, PCRE2_NO_UTF_CHECK, s.data, s.context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            return Status(StatusCode::kResourceExhausted,
                          fmt::format("regex \"{}\" failed on a {}-byte input: {}", code_->source, n, pcre2_error_text(rc)));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
        const size_t start = ovector[0], end = ovector[1];
        if (start == end && end == last_match_end) {
            // Step over one character (onig crate: no empty match right after the previous match).
            if (search_from >= n) break;
            const unsigned char lead = static_cast<unsigned char>(subject[search_from]);
            search_from += lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
            continue;
        }
        out.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(end)});
        search_from = end;
        last_match_end = end;
    }
    return Status::ok();
}

}  // namespace deepinfer::tokenizer
