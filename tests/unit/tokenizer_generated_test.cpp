// Generated tokenizers: the V4.1-style file made from the V3 file (spec §8.2) and the synthetic tokenizer of
// the built-in tiny checkpoint. HF tokenizers loads both and agrees with us (test_tokenizer_corpus.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/protocol_tokens.h"
#include "unit/tokenizer_test_util.h"

namespace deepinfer::tokenizer {
namespace {

using testing::encode_or_die;
using testing::v3_tokenizer_text;
using testing::v41_tokenizer;

TEST(V41Tokenizer, LayoutOfAddedTokens) {
    const Tokenizer& tok = v41_tokenizer();
    EXPECT_EQ(tok.vocab_size(), kV41VocabSize);
    for (const ProtocolToken& p : kV41ProtocolTokens) {
        EXPECT_EQ(tok.token_id(p.content), p.v41_id) << p.content;
        EXPECT_EQ(tok.is_special(p.v41_id), p.special) << p.content;
    }
    EXPECT_EQ(tok.id_to_token(0), kBosToken);
    EXPECT_EQ(tok.id_to_token(2), kPadToken);
    EXPECT_EQ(tok.id_to_token(128798), "<｜place▁holder▁no▁798｜>");  // V3 entry kept
    EXPECT_EQ(tok.id_to_token(128814), "<｜tool▁sep｜>");             // V3 entry kept
    EXPECT_EQ(tok.id_to_token(128815), "<｜place▁holder▁no▁815｜>");  // new placeholder
    EXPECT_TRUE(tok.is_special(128815));
    EXPECT_EQ(tok.id_to_token(129265), "<|place_holder_mm_span_0436|>");
    EXPECT_EQ(tok.id_to_token(129279), "<|place_holder_mm_span_0442|>");
    for (int32_t id = 128000; id < kV41VocabSize; ++id) ASSERT_TRUE(tok.has_id(id)) << id;
}

TEST(V41Tokenizer, SameModelAsV3) {
    auto v3 = nlohmann::json::parse(v3_tokenizer_text());
    auto v41 = nlohmann::json::parse(*make_v41_tokenizer_json(v3_tokenizer_text()));
    for (const char* key : {"model", "normalizer", "pre_tokenizer", "post_processor", "decoder", "truncation", "padding"}) {
        EXPECT_EQ(v3[key], v41[key]) << key;
    }
    EXPECT_EQ(v41["added_tokens"].size(), 1283u);
}

TEST(V41Tokenizer, RejectsInputsThatAreNotV3Family) {
    EXPECT_EQ(make_v41_tokenizer_json("not json").status().code(), StatusCode::kCorrupt);
    EXPECT_EQ(make_v41_tokenizer_json(R"({"model": {"type": "BPE"}})").status().code(), StatusCode::kCorrupt);
    auto bad_id = make_v41_tokenizer_json(
        R"({"model": {"type": "BPE"}, "added_tokens": [{"id": 5, "content": "x"}]})");
    ASSERT_FALSE(bad_id.has_value());
    EXPECT_NE(bad_id.status().message().find("id 5"), std::string::npos) << bad_id.status().message();
}

TEST(SyntheticTokenizer, LayoutAndDeterminism) {
    for (int32_t size : {kMinSyntheticVocabSize, 512, 1024, 4096}) {
        auto json = make_synthetic_tokenizer_json(size);
        ASSERT_TRUE(json.has_value()) << json.status().to_string();
        EXPECT_EQ(*json, *make_synthetic_tokenizer_json(size));
        auto tok = Tokenizer::load_json(*json);
        ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
        EXPECT_EQ(tok->vocab_size(), size);
        for (int32_t id = 0; id < size; ++id) ASSERT_TRUE(tok->has_id(id)) << size << " " << id;
        EXPECT_EQ(tok->id_to_token(0), kBosToken);
        EXPECT_EQ(tok->id_to_token(1), kEosToken);
        EXPECT_EQ(tok->id_to_token(2), kPadToken);
        EXPECT_EQ(tok->id_to_token(3), "!");  // GPT-2 byte order, as DeepSeek's ids 3..
        EXPECT_EQ(tok->id_to_token(258), "Ń");  // the last of the 256 byte symbols
        const int32_t top = size - static_cast<int32_t>(std::size(kV41ProtocolTokens));
        for (size_t k = 0; k < std::size(kV41ProtocolTokens); ++k) {
            EXPECT_EQ(tok->token_id(kV41ProtocolTokens[k].content), top + static_cast<int32_t>(k));
        }
        const std::string text = "<｜User｜>What is the capital of France?<｜Assistant｜><think>";
        EXPECT_EQ(*tok->decode(encode_or_die(*tok, text)), text);
    }
}

TEST(SyntheticTokenizer, LearnsMergesAndFallsBackToPlaceholders) {
    auto tok = Tokenizer::load_json(*make_synthetic_tokenizer_json(1024));
    ASSERT_TRUE(tok.has_value());
    EXPECT_TRUE(tok->token_id("Ġthe").has_value());
    EXPECT_EQ(encode_or_die(*tok, " the").size(), 1u);
    // The training text cannot fill 16384 ids with merges: the rest are special placeholders.
    auto big = Tokenizer::load_json(*make_synthetic_tokenizer_json(16384));
    ASSERT_TRUE(big.has_value());
    EXPECT_TRUE(big->token_id("<｜place▁holder▁no▁0｜>").has_value());
    EXPECT_TRUE(big->is_special(*big->token_id("<｜place▁holder▁no▁0｜>")));
}

TEST(SyntheticTokenizer, SameStructureAsDeepSeek) {
    auto v3 = nlohmann::json::parse(v3_tokenizer_text());
    auto syn = nlohmann::json::parse(*make_synthetic_tokenizer_json(1024));
    for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder"}) EXPECT_EQ(v3[key], syn[key]) << key;
    auto config = nlohmann::json::parse(make_synthetic_tokenizer_config_json());
    EXPECT_FALSE(config["add_bos_token"].get<bool>());
    EXPECT_EQ(config["pad_token"]["content"], std::string(kEosToken));
    EXPECT_EQ(config["bos_token"]["content"], std::string(kBosToken));
}

TEST(SyntheticTokenizer, RejectsTooSmallVocab) {
    auto json = make_synthetic_tokenizer_json(kMinSyntheticVocabSize - 1);
    ASSERT_FALSE(json.has_value());
    EXPECT_EQ(json.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer::tokenizer
