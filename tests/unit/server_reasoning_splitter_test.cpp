// ReasoningSplitter: reasoning / content split at </think> over whole texts and over every way of cutting
// the same text into streamed deltas (the concatenated deltas must equal the one-shot split).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/reasoning_splitter.h"

namespace deepinfer::server {
namespace {

SplitDelta split_whole(bool in_reasoning, const std::string& text) {
    ReasoningSplitter s(in_reasoning);
    SplitDelta a = s.push(text), b = s.finish();
    return {a.reasoning + b.reasoning, a.content + b.content};
}

// Streams `text` in pieces cut at the given sizes (cycled). A marker fragment leaked into a delta would make
// the concatenation differ from the one-shot split.
SplitDelta split_streamed(bool in_reasoning, const std::string& text, const std::vector<size_t>& cuts) {
    ReasoningSplitter s(in_reasoning);
    SplitDelta out;
    size_t pos = 0, k = 0;
    while (pos < text.size()) {
        const size_t len = std::min(cuts[k++ % cuts.size()], text.size() - pos);
        SplitDelta d = s.push(std::string_view(text).substr(pos, len));
        EXPECT_EQ(d.reasoning.find("</think>"), std::string::npos) << d.reasoning;
        out.reasoning += d.reasoning;
        out.content += d.content;
        pos += len;
    }
    SplitDelta rest = s.finish();
    out.reasoning += rest.reasoning;
    out.content += rest.content;
    return out;
}

TEST(ReasoningSplitter, SplitsAtThinkEnd) {
    SplitDelta d = split_whole(true, "let me think</think>The answer is 4.");
    EXPECT_EQ(d.reasoning, "let me think");
    EXPECT_EQ(d.content, "The answer is 4.");
}

TEST(ReasoningSplitter, WithoutMarkerEverythingIsReasoning) {
    ReasoningSplitter s(true);
    SplitDelta a = s.push("still thinking </thi");
    SplitDelta b = s.finish();
    EXPECT_EQ(a.reasoning + b.reasoning, "still thinking </thi");  // a partial marker at the end is text
    EXPECT_TRUE(s.in_reasoning());
    EXPECT_TRUE(s.had_reasoning());
    EXPECT_EQ(a.content + b.content, "");
}

TEST(ReasoningSplitter, ChatModeIsAllContent) {
    ReasoningSplitter s(false);
    SplitDelta d = s.push("a</think>b");
    EXPECT_EQ(d.content, "a</think>b");
    EXPECT_EQ(d.reasoning, "");
    EXPECT_FALSE(s.had_reasoning());
}

TEST(ReasoningSplitter, LeadingThinkOfTheOutputIsDropped) {
    EXPECT_EQ(split_whole(true, "<think>x</think>y").reasoning, "x");
    // Only at the very start: a later <think> is reasoning text.
    EXPECT_EQ(split_whole(true, "a<think>x</think>y").reasoning, "a<think>x");
    // A start that only looks like <think> is kept.
    EXPECT_EQ(split_whole(true, "<thin").reasoning, "<thin");
}

TEST(ReasoningSplitter, ContentAfterTheMarkerMayHoldAnotherMarker) {
    SplitDelta d = split_whole(true, "r</think>c1</think>c2");
    EXPECT_EQ(d.reasoning, "r");
    EXPECT_EQ(d.content, "c1</think>c2");
}

TEST(ReasoningSplitter, StreamedEqualsWholeForEveryCutting) {
    const std::vector<std::string> texts = {
        "abc</think>def", "</think>", "x</think", "<think>a</think>b", "</</think>c", "ok</th</think>done",
        "日本語</think>テキスト", "no marker at all <", "<<think>x"};
    std::mt19937 rng(7);
    for (const auto& text : texts) {
        for (bool mode : {true, false}) {
            const SplitDelta whole = split_whole(mode, text);
            for (size_t step = 1; step <= text.size(); ++step) {
                SplitDelta s = split_streamed(mode, text, {step});
                EXPECT_EQ(s.reasoning, whole.reasoning) << text << " step " << step;
                EXPECT_EQ(s.content, whole.content) << text << " step " << step;
            }
            for (int trial = 0; trial < 20; ++trial) {
                std::vector<size_t> cuts;
                for (int k = 0; k < 8; ++k) cuts.push_back(1 + rng() % 4);
                SplitDelta s = split_streamed(mode, text, cuts);
                EXPECT_EQ(s.reasoning, whole.reasoning) << text;
                EXPECT_EQ(s.content, whole.content) << text;
            }
        }
    }
}

}  // namespace
}  // namespace deepinfer::server
