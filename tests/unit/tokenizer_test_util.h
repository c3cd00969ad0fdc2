// Shared loaders for the tokenizer tests: the V3-family file from the shared test data, the V4.1-style file
// made from it, and the synthetic tokenizer. Each is built once per test process.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/test_support.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/v41_tokenizer.h"

namespace deepinfer::tokenizer::testing {

inline std::string v3_tokenizer_path() {
    return (deepinfer::testing::shared_data_dir() / "deepseek-v3-tokenizer" / "tokenizer.json").string();
}

inline const std::string& v3_tokenizer_text() {
    static const std::string text = [] {
        std::ifstream in(v3_tokenizer_path(), std::ios::binary);
        std::ostringstream buffer;
        buffer << in.rdbuf();
        return buffer.str();
    }();
    return text;
}

inline const Tokenizer& v3_tokenizer() {
    static const Tokenizer tok = [] {
        auto t = Tokenizer::load_file(v3_tokenizer_path());
        if (!t) ADD_FAILURE() << t.status().to_string();
        return std::move(t).value();
    }();
    return tok;
}

inline const Tokenizer& v41_tokenizer() {
    static const Tokenizer tok = [] {
        auto json = make_v41_tokenizer_json(v3_tokenizer_text());
        if (!json) ADD_FAILURE() << json.status().to_string();
        auto t = Tokenizer::load_json(*json);
        if (!t) ADD_FAILURE() << t.status().to_string();
        return std::move(t).value();
    }();
    return tok;
}

inline const Tokenizer& synthetic_tokenizer() {
    static const Tokenizer tok = [] {
        auto json = make_synthetic_tokenizer_json();
        if (!json) ADD_FAILURE() << json.status().to_string();
        auto t = Tokenizer::load_json(*json);
        if (!t) ADD_FAILURE() << t.status().to_string();
        return std::move(t).value();
    }();
    return tok;
}

inline std::vector<int32_t> encode_or_die(const Tokenizer& tok, std::string_view text) {
    auto ids = tok.encode(text);
    EXPECT_TRUE(ids.has_value()) << ids.status().to_string();
    return ids ? *ids : std::vector<int32_t>{};
}

}  // namespace deepinfer::tokenizer::testing
