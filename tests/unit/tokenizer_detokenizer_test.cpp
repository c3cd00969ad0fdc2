// Incremental detokenizer: never emits broken UTF-8, never drops bytes, and its output concatenates to the
// full decode, including for tokens that split characters and for ill-formed byte sequences.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/detokenizer.h"
#include "tokenizer/utf8.h"
#include "unit/tokenizer_test_util.h"

namespace deepinfer::tokenizer {
namespace {

using testing::encode_or_die;
using testing::v41_tokenizer;

std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special, std::vector<std::string>* pieces) {
    IncrementalDetokenizer detok(tok, skip_special);
    std::string all;
    for (int32_t id : ids) {
        auto piece = detok.push(id);
        EXPECT_TRUE(piece.has_value()) << piece.status().to_string();
        EXPECT_TRUE(is_valid_utf8(*piece));
        EXPECT_LE(detok.pending_bytes(), 3u);
        if (pieces) pieces->push_back(*piece);
        all += *piece;
    }
    std::string tail = detok.flush();
    EXPECT_TRUE(is_valid_utf8(tail));
    EXPECT_EQ(detok.pending_bytes(), 0u);
    return all + tail;
}

TEST(IncrementalDetokenizer, HoldsBackSplitCharacters) {
    const Tokenizer& tok = v41_tokenizer();
    // " 🌍" is 73369 (space + first 3 bytes of the emoji) then 238 (last byte).
    std::vector<std::string> pieces;
    EXPECT_EQ(stream(tok, {73369, 238}, false, &pieces), " 🌍");
    EXPECT_EQ(pieces, (std::vector<std::string>{" ", "🌍"}));
}

TEST(IncrementalDetokenizer, StreamOfEncodedTextIsTheText) {
    const Tokenizer& tok = v41_tokenizer();
    const std::string text = "Καλημέρα κόσμε 🌍👨‍👩‍👧 你好，世界！ naïve café\n<think>x</think> ok";
    auto ids = encode_or_die(tok, text);
    EXPECT_EQ(stream(tok, ids, false, nullptr), text);
}

TEST(IncrementalDetokenizer, RandomIdsMatchFullDecode) {
    const Tokenizer& tok = v41_tokenizer();
    std::mt19937 rng(7);
    // Mostly single-byte and short tokens (ids below ~1000 include all 256 byte tokens), some specials.
    std::uniform_int_distribution<int32_t> small(0, 1200), any(0, tok.vocab_size() - 1);
    for (int trial = 0; trial < 300; ++trial) {
        std::vector<int32_t> ids;
        const int n = 1 + trial % 40;
        for (int k = 0; k < n; ++k) ids.push_back(rng() % 4 ? small(rng) : any(rng));
        for (bool skip : {false, true}) {
            EXPECT_EQ(stream(tok, ids, skip, nullptr), *tok.decode(ids, skip)) << "trial " << trial;
        }
    }
}

TEST(IncrementalDetokenizer, IllFormedBytesBecomeReplacementCharacters) {
    const Tokenizer& tok = v41_tokenizer();
    // Byte tokens: find the ids of single bytes 0xE2, 0x82, 0x41 ('A') through their byte-level symbols.
    auto byte_id = [&](unsigned char b) {
        for (int32_t id = 0; id < 300; ++id) {
            std::string bytes;
            if (tok.decode_bytes(std::vector<int32_t>{id}, false, bytes).is_ok() && bytes == std::string(1, static_cast<char>(b))) return id;
        }
        ADD_FAILURE() << "no token for byte " << int(b);
        return 0;
    };
    const int32_t e2 = byte_id(0xE2), x82 = byte_id(0x82), a = byte_id('A');
    std::vector<std::string> pieces;
    EXPECT_EQ(stream(tok, {e2, x82, a}, false, &pieces), "\xEF\xBF\xBD" "A");
    EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "\xEF\xBF\xBD" "A"}));
    // An incomplete sequence at the end is flushed as one U+FFFD, like a full decode.
    EXPECT_EQ(stream(tok, {a, e2, x82}, false, nullptr), "A\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, UnknownIdLeavesStateUnchanged) {
    const Tokenizer& tok = v41_tokenizer();
    IncrementalDetokenizer detok(tok);
    ASSERT_TRUE(detok.push(73369).has_value());
    EXPECT_EQ(detok.pending_bytes(), 3u);
    auto bad = detok.push(std::vector<int32_t>{238, 5000000});
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(detok.pending_bytes(), 3u);
    EXPECT_EQ(*detok.push(238), "🌍");
}

}  // namespace
}  // namespace deepinfer::tokenizer
