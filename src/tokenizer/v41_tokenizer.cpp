// V4.1-style tokenizer.json and tokenizer_config.json (see v41_tokenizer.h).
#include "tokenizer/v41_tokenizer.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "tokenizer/protocol_tokens.h"

namespace deepinfer::tokenizer {
namespace {

// Plain (key-sorted) json: ordered_json looks keys up linearly, which is quadratic on a 128k-entry vocab.
using Json = nlohmann::json;

constexpr int32_t kFirstAddedId = 128000;

Json added_token(int32_t id, std::string_view content, bool special, bool normalized) {
    // Field order of HF's serialization (AddedTokenWithId).
    return Json{{"id", id},           {"content", std::string(content)}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false},    {"normalized", normalized},         {"special", special}};
}

nlohmann::ordered_json config_token(std::string_view content) {
    return nlohmann::ordered_json{{"__type", "AddedToken"}, {"content", std::string(content)}, {"lstrip", false},
                {"normalized", true},     {"rstrip", false},                  {"single_word", false}};
}

Expected<std::string> build(std::string_view v3_json) {
    Json doc = Json::parse(v3_json, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) return corrupt("V3 tokenizer.json is not a JSON object");
    if (!doc.contains("model") || !doc["model"].is_object() || doc["model"].value("type", "") != "BPE") {
        return corrupt("V3 tokenizer.json: model must be a BPE model");
    }
    if (!doc.contains("added_tokens") || !doc["added_tokens"].is_array()) {
        return corrupt("V3 tokenizer.json: \"added_tokens\" must be an array");
    }
    std::map<int32_t, Json> v3;
    for (const Json& t : doc["added_tokens"]) {
        if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content")) {
            return corrupt("V3 tokenizer.json: added token {} lacks an integer id or a content", t.dump());
        }
        const int32_t id = t["id"].get<int32_t>();
        if (!(id <= 2 || (id >= kFirstAddedId && id < kV41VocabSize))) {
            return corrupt("V3 tokenizer.json: added token id {} is outside 0..2 and {}..{}", id, kFirstAddedId,
                           kV41VocabSize - 1);
        }
        v3[id] = t;
    }
    for (int32_t id = 0; id <= 2; ++id) {
        if (!v3.count(id)) return corrupt("V3 tokenizer.json: no added token with id {} (BOS/EOS/PAD)", id);
    }

    std::map<int32_t, Json> known;
    for (const ProtocolToken& p : kV41ProtocolTokens) known[p.v41_id] = added_token(p.v41_id, p.content, p.special, p.normalized);
    // Multimodal placeholders the V4.1 release puts where V4 had table/image tokens (source S13).
    for (int32_t k = 0; k < 6; ++k) {
        known[129265 + k] = added_token(129265 + k, fmt::format("<|place_holder_mm_span_{:04d}|>", 436 + k), false, false);
    }
    known[129279] = added_token(129279, "<|place_holder_mm_span_0442|>", true, false);

    Json added = Json::array();
    for (int32_t id = 0; id <= 2; ++id) added.push_back(v3[id]);
    for (int32_t id = kFirstAddedId; id < kV41VocabSize; ++id) {
        if (auto it = known.find(id); it != known.end()) {
            added.push_back(it->second);
        } else if (auto v = v3.find(id); v != v3.end()) {
            added.push_back(v->second);
        } else {
            added.push_back(added_token(id, fmt::format("<｜place▁holder▁no▁{}｜>", id - kFirstAddedId), true, false));
        }
    }
    doc["added_tokens"] = std::move(added);
    return doc.dump(2, ' ', /*ensure_ascii=*/false);
}

}  // namespace

Expected<std::string> make_v41_tokenizer_json(std::string_view v3_json) {
    try {
        return build(v3_json);
    } catch (const nlohmann::json::exception& e) {
        return corrupt("V3 tokenizer.json: unexpected value type: {}", e.what());
    }
}

std::string make_v41_tokenizer_config_json() {
    nlohmann::ordered_json config = {
        {"add_bos_token", false},
        {"add_eos_token", false},
        {"bos_token", config_token(kBosToken)},
        {"clean_up_tokenization_spaces", false},
        {"eos_token", config_token(kEosToken)},
        {"legacy", true},
        {"model_max_length", 1048576},
        {"pad_token", config_token(kEosToken)},
        {"sp_model_kwargs", nlohmann::ordered_json::object()},
        {"unk_token", nullptr},
        {"tokenizer_class", "PreTrainedTokenizerFast"},
    };
    return config.dump(2, ' ', false) + "\n";
}

}  // namespace deepinfer::tokenizer
