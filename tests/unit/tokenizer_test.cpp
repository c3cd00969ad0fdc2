// Tokenizer probes of spec §8.2 (and source S13), decode rules, and the errors for bad input. Identity with
// HF tokenizers over a 10,000-string corpus is tested by test_tokenizer_corpus.py.
#include <gtest/gtest.h>

#include <thread>

#include "unit/tokenizer_test_util.h"

namespace deepinfer::tokenizer {
namespace {

using testing::encode_or_die;
using testing::synthetic_tokenizer;
using testing::v3_tokenizer;
using testing::v41_tokenizer;

const std::vector<int32_t> kHelloIds = {19923, 14, 2058, 3, 223, 6895, 201, 10930, 2562};

TEST(Tokenizer, HelloProbeSpec82) {
    EXPECT_EQ(encode_or_die(v3_tokenizer(), "Hello, world! 123\nsecond line"), kHelloIds);
    EXPECT_EQ(encode_or_die(v41_tokenizer(), "Hello, world! 123\nsecond line"), kHelloIds);
}

TEST(Tokenizer, ChatProbeSpec82) {
    const std::string text =
        "<｜begin▁of▁sentence｜><｜User｜>question<｜Assistant｜><think>reason</think>answer<｜end▁of▁sentence｜>";
    EXPECT_EQ(encode_or_die(v41_tokenizer(), text),
              (std::vector<int32_t>{0, 128803, 20072, 128804, 128821, 86512, 128822, 19995, 1}));
    // V3 has no <think> tokens: they are spelled out.
    EXPECT_EQ(encode_or_die(v3_tokenizer(), text),
              (std::vector<int32_t>{0, 128803, 20072, 128804, 30, 37947, 32, 86512, 1718, 37947, 32, 19995, 1}));
}

TEST(Tokenizer, MultilingualAndTaskProbesS13) {
    EXPECT_EQ(encode_or_die(v41_tokenizer(), "你好，世界！ Καλημέρα κόσμε 🌍"),
              (std::vector<int32_t>{30594, 303, 3427, 1175, 51901, 25696, 29537, 11983, 122189, 2781, 30619, 73369, 238}));
    EXPECT_EQ(encode_or_die(v41_tokenizer(),
                            "｜DSML｜<｜action｜><｜query｜><｜authority｜><｜domain｜><｜title｜><｜read_url｜><｜latest_reminder｜>"),
              (std::vector<int32_t>{128825, 128829, 128830, 128831, 128832, 128836, 128845, 128828}));
    EXPECT_TRUE(encode_or_die(v41_tokenizer(), "").empty());
}

TEST(Tokenizer, DecodeRoundTripsAndSkipsSpecials) {
    const Tokenizer& tok = v41_tokenizer();
    const std::vector<int32_t> ids = {0, 128799, 20072, 128803, 20072, 128804, 128821, 86512, 128822, 19995, 1};
    EXPECT_EQ(*tok.decode(ids),
              "<｜begin▁of▁sentence｜><｜System｜>question<｜User｜>question<｜Assistant｜><think>reason</think>answer"
              "<｜end▁of▁sentence｜>");
    // BOS/EOS are special; <｜System｜> is not special in V4.1 (spec §8.2), nor are the protocol tokens.
    EXPECT_EQ(*tok.decode(ids, /*skip_special=*/true),
              "<｜System｜>question<｜User｜>question<｜Assistant｜><think>reason</think>answer");
    EXPECT_EQ(*tok.decode(kHelloIds), "Hello, world! 123\nsecond line");
}

TEST(Tokenizer, VocabularyQueries) {
    const Tokenizer& v3 = v3_tokenizer();
    EXPECT_EQ(v3.vocab_size(), 128815);
    EXPECT_EQ(v41_tokenizer().vocab_size(), 129280);
    EXPECT_EQ(v3.token_id("<｜User｜>"), 128803);
    EXPECT_EQ(v3.token_id("Ġworld"), 2058);
    EXPECT_EQ(v3.token_id("no such token"), std::nullopt);
    EXPECT_EQ(v3.id_to_token(2058), "Ġworld");
    EXPECT_EQ(v3.id_to_token(128815), std::nullopt);
    EXPECT_TRUE(v3.is_special(0));
    EXPECT_FALSE(v3.is_special(128803));
    EXPECT_FALSE(v3.is_special(2058));
    EXPECT_EQ(v41_tokenizer().token_id("<｜System｜>"), 128799);
    EXPECT_FALSE(v41_tokenizer().is_special(128799));
    EXPECT_EQ(v41_tokenizer().added_token_ids().size(), 1283u);
}

TEST(Tokenizer, InvalidUtf8IsRepairedLikePython) {
    const Tokenizer& tok = v3_tokenizer();
    // Maximal subparts: "\xE2\x82" is one U+FFFD, "\xED\xA0\x80" (a surrogate) is three.
    EXPECT_EQ(encode_or_die(tok, "a\xE2\x82" "b"), encode_or_die(tok, "a\xEF\xBF\xBD" "b"));
    EXPECT_EQ(encode_or_die(tok, "\xED\xA0\x80"), encode_or_die(tok, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
    EXPECT_EQ(encode_or_die(tok, "x\xFF"), encode_or_die(tok, "x\xEF\xBF\xBD"));
}

TEST(Tokenizer, DecodeOfPartialBytesIsLossyButBytesAreExact) {
    const Tokenizer& tok = v3_tokenizer();
    // 73369 = "ĠðŁĮ" (space + 3 bytes of U+1F30D), 238 = "į" (its last byte).
    std::string bytes;
    ASSERT_TRUE(tok.decode_bytes(std::vector<int32_t>{73369}, false, bytes).is_ok());
    EXPECT_EQ(bytes, " \xF0\x9F\x8C");
    EXPECT_EQ(*tok.decode(std::vector<int32_t>{73369}), " \xEF\xBF\xBD");
    EXPECT_EQ(*tok.decode(std::vector<int32_t>{73369, 238}), " \xF0\x9F\x8C\x8D");
}

TEST(Tokenizer, LongRunsEncodeAndRoundTrip) {
    const Tokenizer& tok = v3_tokenizer();
    for (const std::string& text : {std::string(1 << 20, ' '), std::string(1 << 20, 'a'), std::string(200000, '7'),
                                    std::string(300000, '\n')}) {
        auto ids = tok.encode(text);
        ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
        EXPECT_EQ(*tok.decode(*ids), text);
    }
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
    const Tokenizer& tok = v41_tokenizer();
    std::vector<std::string> texts;
    for (int i = 0; i < 200; ++i) texts.push_back("line " + std::to_string(i * 7919) + " 你好 wörld\t<think>x</think> " + std::to_string(i));
    std::vector<std::vector<int32_t>> expected;
    for (const auto& t : texts) expected.push_back(encode_or_die(tok, t));
    std::vector<int> failures(4, 0);
    std::vector<std::thread> threads;
    for (int w = 0; w < 4; ++w) {
        threads.emplace_back([&, w] {
            for (int round = 0; round < 20; ++round) {
                for (size_t i = 0; i < texts.size(); ++i) {
                    auto ids = tok.encode(texts[(i + w * 13) % texts.size()]);
                    if (!ids || *ids != expected[(i + w * 13) % texts.size()]) ++failures[w];
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures, std::vector<int>(4, 0));
}

TEST(Tokenizer, SyntheticRoundTrip) {
    const Tokenizer& tok = synthetic_tokenizer();
    const std::string text = "The keeper's log: 19:42, sea calm.\n<｜User｜>hi<think>ok</think> 你好 🌍";
    auto ids = encode_or_die(tok, text);
    EXPECT_EQ(*tok.decode(ids), text);
    EXPECT_LT(ids.size(), text.size());  // merges were learned and used
}

// ---- errors -------------------------------------------------------------------------------------------------

std::string tiny_tokenizer_json(const std::string& model_patch, const std::string& pre_tokenizer = "") {
    const std::string pre = pre_tokenizer.empty()
                                ? R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})"
                                : pre_tokenizer;
    return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
               "pre_tokenizer": )" + pre + R"(, "post_processor": null,
               "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
               "model": )" + model_patch + "}";
}

void expect_error(const Expected<Tokenizer>& t, StatusCode code, const std::string& needle) {
    ASSERT_FALSE(t.has_value());
    EXPECT_EQ(t.status().code(), code) << t.status().to_string();
    EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().message();
}

TEST(TokenizerErrors, UnknownIdOnDecode) {
    auto text = v3_tokenizer().decode(std::vector<int32_t>{19923, 999999});
    ASSERT_FALSE(text.has_value());
    EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(text.status().message().find("999999"), std::string::npos) << text.status().message();
    EXPECT_FALSE(v3_tokenizer().decode(std::vector<int32_t>{-1}).has_value());
}

TEST(TokenizerErrors, MalformedJson) {
    expect_error(Tokenizer::load_json("{\"model\": "), StatusCode::kCorrupt, "not valid JSON");
    expect_error(Tokenizer::load_json("[1, 2]"), StatusCode::kCorrupt, "JSON object");
    expect_error(Tokenizer::load_json(R"({"version": "1.0"})"), StatusCode::kCorrupt, "missing \"model\"");
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": "x"}, "merges": []})")),
                 StatusCode::kCorrupt, "model.vocab[\"a\"]");
}

TEST(TokenizerErrors, MissingMerges) {
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}})")), StatusCode::kCorrupt,
                 "\"merges\"");
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]})")),
                 StatusCode::kCorrupt, "token \"ab\" is not in the vocabulary");
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]})")),
                 StatusCode::kCorrupt, "model.merges[0]");
}

TEST(TokenizerErrors, WrongModelOrComponents) {
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "WordPiece", "vocab": {"a": 0}})")),
                 StatusCode::kUnsupported, "WordPiece");
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": []})",
                                                          R"({"type": "Metaspace", "replacement": "_"})")),
                 StatusCode::kUnsupported, "Metaspace");
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": []})",
                                                          R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": false})")),
                 StatusCode::kUnsupported, "ByteLevel");
    expect_error(Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": []})",
                                                          R"({"type": "Split", "pattern": {"Regex": "[a"}, "behavior": "Isolated", "invert": false})")),
                 StatusCode::kInvalidArgument, "unterminated character class");
    std::string with_truncation = tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": []})");
    with_truncation.replace(with_truncation.find("\"truncation\": null"), 18, R"("truncation": {"max_length": 8})");
    expect_error(Tokenizer::load_json(with_truncation), StatusCode::kUnsupported, "truncation");
}

TEST(TokenizerErrors, MissingFileNamesThePath) {
    expect_error(Tokenizer::load_file("/nonexistent/dir/tokenizer.json"), StatusCode::kNotFound, "/nonexistent/dir/tokenizer.json");
}

TEST(TokenizerErrors, MinimalValidTokenizerWorks) {
    // Control for the error tests: the same skeleton with a consistent model loads and encodes.
    auto t = Tokenizer::load_json(tiny_tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})"));
    ASSERT_TRUE(t.has_value()) << t.status().to_string();
    EXPECT_EQ(*t->encode("abba"), (std::vector<int32_t>{2, 1, 0}));
    // " b" is one pre-token; its space byte has no token and no unk is set, so it disappears (as in HF).
    EXPECT_EQ(*t->encode("a b"), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace deepinfer::tokenizer
