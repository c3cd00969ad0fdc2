// Oniguruma-on-PCRE2 regex translation (onig_regex.h): the class and category semantics HF tokenizers' regexes
// have, the Unicode 16 additions PCRE2 10.42 lacks, anchors, options, and onig-style empty-match iteration.
#include <gtest/gtest.h>

#include "tokenizer/onig_regex.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

std::vector<std::pair<uint32_t, uint32_t>> matches(std::string_view pattern, std::string_view subject) {
    auto re = Regex::compile(pattern);
    EXPECT_TRUE(re.has_value()) << re.status().to_string();
    std::vector<MatchSpan> spans;
    EXPECT_TRUE(re->find_all(subject, spans).is_ok());
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (auto s : spans) out.push_back({s.start, s.end});
    return out;
}

bool full_match(std::string_view pattern, char32_t cp) {
    std::string s;
    append_utf8(s, cp);
    auto m = matches(pattern, s);
    return m.size() == 1 && m[0].first == 0 && m[0].second == s.size();
}

TEST(OnigRegex, WhiteSpaceIncludesNextLine) {
    // Oniguruma's \s is White_Space, which has U+0085; PCRE2's own \s does not.
    EXPECT_TRUE(full_match(R"(\s)", 0x85));
    EXPECT_TRUE(full_match(R"(\s)", 0x3000));
    EXPECT_FALSE(full_match(R"(\s)", 0x200B));
    EXPECT_FALSE(full_match(R"(\S)", 0x85));
    EXPECT_TRUE(full_match(R"([^\s\p{L}])", '1'));
    EXPECT_FALSE(full_match(R"([^\s\p{L}])", 0x85));
}

TEST(OnigRegex, RubyEscapes) {
    EXPECT_TRUE(full_match(R"(\h)", 'F'));   // Ruby: hex digit
    EXPECT_FALSE(full_match(R"(\h)", ' '));  // PCRE2 would say horizontal space
    EXPECT_TRUE(full_match(R"(\w)", 0x301));  // combining mark
    EXPECT_TRUE(full_match(R"(\w)", 0x203F)); // connector punctuation
    EXPECT_FALSE(full_match(R"(\d)", 0xB2));  // superscript two is No, not Nd
    EXPECT_TRUE(full_match(R"(\u00e9)", 0xE9));
}

TEST(OnigRegex, CategoriesIncludeCodePointsNewerThanPcre2) {
    EXPECT_TRUE(full_match(R"(\p{L})", 0x2EBF0));   // CJK Extension I (Unicode 15.1)
    EXPECT_TRUE(full_match(R"(\p{L})", 0x105C0));   // Todhri (Unicode 16)
    EXPECT_TRUE(full_match(R"(\p{N})", 0x11F50));   // Kawi digit (Unicode 15)
    EXPECT_TRUE(full_match(R"(\p{Nd})", 0x10D40));  // Garay digit (Unicode 16)
    EXPECT_TRUE(full_match(R"([\p{L}\p{M}]+)", 0x11F04));
    EXPECT_FALSE(full_match(R"(\P{L})", 0x105C0));
    EXPECT_FALSE(full_match(R"([^\p{L}])", 0x105C0));
    EXPECT_FALSE(full_match(R"(\p{L})", 0x0378));   // still unassigned
    EXPECT_TRUE(full_match(R"(\p{Letter})", 'a'));
}

TEST(OnigRegex, NegatedItemsInsideClasses) {
    EXPECT_TRUE(full_match(R"([a\S])", 'b'));
    EXPECT_TRUE(full_match(R"([a\S])", 'a'));
    EXPECT_FALSE(full_match(R"([a\S])", ' '));
    EXPECT_TRUE(full_match(R"([^a\S])", ' '));
    EXPECT_FALSE(full_match(R"([^a\S])", 'b'));
    EXPECT_TRUE(full_match(R"([^a\S])", 0x85));  // U+0085 is White_Space in Oniguruma
    EXPECT_TRUE(full_match(R"([^a\S])", 0x2028));
}

TEST(OnigRegex, AnchorsAreLineAnchorsAndMIsDotAll) {
    EXPECT_EQ(matches("^a", "a\na a"), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}, {2, 3}}));
    EXPECT_EQ(matches("a$", "a\na a\n"), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}, {4, 5}}));
    EXPECT_EQ(matches("(?m)a.b", "a\nb"), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 3}}));
    EXPECT_TRUE(matches("a.b", "a\nb").empty());
    EXPECT_EQ(matches("^ $", " "), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}}));
    EXPECT_TRUE(matches("^ $", "  ").empty());
}

TEST(OnigRegex, EmptyMatchesIterateLikeTheOnigCrate) {
    // HF splits "abxxc" with x* into a | b | xx | c: empty matches at 0, 1 and 5, and "xx".
    EXPECT_EQ(matches("x*", "abxxc"), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 0}, {1, 1}, {2, 4}, {5, 5}}));
    EXPECT_EQ(matches("x*", "é"), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 0}, {2, 2}}));
}

TEST(OnigRegex, LiteralPatterns) {
    auto re = Regex::compile_literal("a.b*(c)");
    ASSERT_TRUE(re.has_value());
    std::vector<MatchSpan> spans;
    ASSERT_TRUE(re->find_all("xa.b*(c)ya-bc", spans).is_ok());
    ASSERT_EQ(spans.size(), 1u);
    EXPECT_EQ(spans[0].start, 1u);
}

TEST(OnigRegex, UntranslatableConstructsAreErrors) {
    EXPECT_EQ(Regex::compile("[a-z&&[^aeiou]]").status().code(), StatusCode::kUnsupported);
    EXPECT_EQ(Regex::compile("[a[bc]]").status().code(), StatusCode::kUnsupported);
    EXPECT_EQ(Regex::compile("(").status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Regex::compile("[[:alpha:]]+").has_value());
}

}  // namespace
}  // namespace deepinfer::tokenizer
