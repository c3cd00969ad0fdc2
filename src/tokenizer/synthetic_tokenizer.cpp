// Synthetic DeepSeek-style tokenizer.json (see synthetic_tokenizer.h).
#include "tokenizer/synthetic_tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/protocol_tokens.h"
#include "tokenizer/v41_tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

using Json = nlohmann::ordered_json;

// The three Split regexes of DeepSeek's tokenizer.json (V3 through V4.1): digit runs of up to three, runs of
// CJK ideographs and kana, then words / punctuation / whitespace.
Json deepseek_pre_tokenizer() {
    auto split = [](const char* regex) {
        return Json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
    };
    return Json{{"type", "Sequence"},
                {"pretokenizers",
                 {split(R"(\p{N}{1,3})"), split("[一-龥぀-ゟ゠-ヿ]+"),
                  split(R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)" "\r\n" R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)"
                        "\r\n" R"(]*|\s*[)" "\r\n" R"(]+|\s+(?!\S)|\s+)"),
                  Json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
}

Json added_token(int32_t id, std::string_view content, bool special, bool normalized) {
    return Json{{"id", id},        {"content", std::string(content)}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", normalized},         {"special", special}};
}

// Word frequencies of the training text under DeepSeek's pre-tokenizer.
Expected<std::map<std::string, int64_t>> training_words() {
    DI_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::from_json(nlohmann::json::parse(deepseek_pre_tokenizer().dump())));
    PreTokenizerScratch scratch;
    std::vector<std::string_view> words;
    DI_RETURN_IF_ERROR(pre.split(synthetic_training_text(), scratch, words));
    std::map<std::string, int64_t> counts;
    for (std::string_view w : words) ++counts[std::string(w)];
    return counts;
}

}  // namespace

std::string deepseek_pre_tokenizer_json() { return deepseek_pre_tokenizer().dump(); }

Expected<std::string> make_synthetic_tokenizer_json(int32_t vocab_size) {
    constexpr auto kProtocolCount = static_cast<int32_t>(std::size(kV41ProtocolTokens));
    static_assert(kMinSyntheticVocabSize == 3 + 256 + kProtocolCount);
    if (vocab_size < kMinSyntheticVocabSize) {
        return invalid_argument("synthetic tokenizer: vocab_size {} is below the minimum {} (3 specials, 256 bytes, {} "
                                "protocol tokens)", vocab_size, kMinSyntheticVocabSize, kProtocolCount);
    }
    const int32_t first_protocol_id = vocab_size - kProtocolCount;
    DI_ASSIGN_OR_RETURN(auto words, training_words());
    const BpeTrainingResult trained = train_bpe(words, static_cast<size_t>(first_protocol_id - 3 - 256));

    Json vocab = Json::object();
    int32_t next_id = 0;
    for (std::string_view special : {kBosToken, kEosToken, kPadToken}) vocab[std::string(special)] = next_id++;
    // GPT-2 order: the printable bytes first, then the rest (as DeepSeek's ids 3.. are laid out).
    for (int pass = 0; pass < 2; ++pass) {
        for (int b = 0; b < 256; ++b) {
            const bool printable = byte_to_char(static_cast<uint8_t>(b)) == static_cast<char32_t>(b);
            if (printable == (pass == 0)) vocab[bytes_to_symbols(std::string(1, static_cast<char>(b)))] = next_id++;
        }
    }
    for (const std::string& token : trained.new_tokens) vocab[bytes_to_symbols(token)] = next_id++;
    Json merges = Json::array();
    for (const auto& [left, right] : trained.merges) merges.push_back(bytes_to_symbols(left) + " " + bytes_to_symbols(right));

    Json added = Json::array();
    added.push_back(added_token(0, kBosToken, true, false));
    added.push_back(added_token(1, kEosToken, true, false));
    added.push_back(added_token(2, kPadToken, true, false));
    for (int32_t id = next_id, n = 0; id < first_protocol_id; ++id, ++n) {
        added.push_back(added_token(id, fmt::format("<｜place▁holder▁no▁{}｜>", n), true, false));
    }
    for (int32_t k = 0; k < kProtocolCount; ++k) {
        const ProtocolToken& p = kV41ProtocolTokens[k];
        added.push_back(added_token(first_protocol_id + k, p.content, p.special, p.normalized));
    }

    Json doc = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", std::move(added)},
        {"normalizer", {{"type", "Sequence"}, {"normalizers", Json::array()}}},
        {"pre_tokenizer", deepseek_pre_tokenizer()},
        {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}}},
    };
    return doc.dump(2, ' ', /*ensure_ascii=*/false);
}

std::string make_synthetic_tokenizer_config_json() { return make_v41_tokenizer_config_json(); }

}  // namespace deepinfer::tokenizer
