// Tokenizer loading and the encode/decode pipeline (see tokenizer.h). The encode steps mirror tokenizers'
// TokenizerImpl::encode_single_sequence: added tokens with normalized=false are cut from the raw text; each
// remaining piece is normalized and cut again by the normalized added tokens; what remains is
// pre-tokenized and each pre-token goes through BPE; the post-processor runs last.
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>

#include "core/log.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// One element of a TemplateProcessing "single" template: the sequence itself, or fixed ids.
using TemplatePiece = std::variant<std::monostate, std::vector<int32_t>>;

struct EncodeScratch {
    std::string repaired;
    std::string normalized;
    std::vector<Segment> raw_segments;
    std::vector<Segment> normalized_segments;
    std::vector<std::string_view> pre_tokens;
    PreTokenizerScratch pre;
    std::vector<int32_t> sequence;
};

Expected<std::vector<TemplatePiece>> parse_template(const nlohmann::json& spec, const std::string& where) {
    auto single = spec.find("single");
    auto specials = spec.find("special_tokens");
    if (single == spec.end() || !single->is_array()) return corrupt("{}: \"single\" must be an array", where);
    std::vector<TemplatePiece> pieces;
    for (const auto& piece : *single) {
        if (piece.contains("Sequence")) {
            pieces.emplace_back(std::monostate{});
        } else if (piece.contains("SpecialToken") && piece["SpecialToken"].contains("id")) {
            const std::string name = piece["SpecialToken"]["id"].get<std::string>();
            if (specials == spec.end() || !specials->contains(name) || !(*specials)[name].contains("ids")) {
                return corrupt("{}: special token \"{}\" is not described in \"special_tokens\"", where, name);
            }
            pieces.emplace_back((*specials)[name]["ids"].get<std::vector<int32_t>>());
        } else {
            return corrupt("{}: template piece {} is neither a Sequence nor a SpecialToken", where, piece.dump());
        }
    }
    return pieces;
}

Status parse_post_processor(const nlohmann::json& spec, std::vector<std::vector<TemplatePiece>>& templates) {
    if (spec.is_null()) return Status::ok();
    const std::string type = spec.value("type", "");
    if (type == "ByteLevel") return Status::ok();  // only trims offsets, which we do not produce
    if (type == "Sequence") {
        if (!spec.contains("processors") || !spec["processors"].is_array()) {
            return corrupt("post_processor Sequence: \"processors\" must be an array");
        }
        for (const auto& child : spec["processors"]) DI_RETURN_IF_ERROR(parse_post_processor(child, templates));
        return Status::ok();
    }
    if (type == "TemplateProcessing") {
        DI_ASSIGN_OR_RETURN(auto pieces, parse_template(spec, "post_processor TemplateProcessing"));
        templates.push_back(std::move(pieces));
        return Status::ok();
    }
    return error(StatusCode::kUnsupported,
                 "post_processor type \"{}\" is not supported (supported: ByteLevel, TemplateProcessing, Sequence)", type);
}

Status check_decoder(const nlohmann::json& spec) {
    if (spec.is_object() && spec.value("type", "") == "ByteLevel") return Status::ok();
    if (spec.is_object() && spec.value("type", "") == "Sequence" && spec.contains("decoders") &&
        spec["decoders"].is_array() && spec["decoders"].size() == 1) {
        return check_decoder(spec["decoders"][0]);
    }
    return error(StatusCode::kUnsupported, "decoder {} is not supported; byte-level BPE needs the ByteLevel decoder",
                 spec.is_null() ? std::string("null") : spec.dump().substr(0, 120));
}

Expected<std::vector<AddedToken>> parse_added_tokens(const nlohmann::json& spec, std::vector<int64_t>& ids) {
    std::vector<AddedToken> tokens;
    if (spec.is_null()) return tokens;
    if (!spec.is_array()) return corrupt("added_tokens: expected an array");
    for (size_t k = 0; k < spec.size(); ++k) {
        const auto& t = spec[k];
        if (!t.is_object() || !t.contains("content") || !t["content"].is_string()) {
            return corrupt("added_tokens[{}]: expected an object with a string \"content\"", k);
        }
        if (!t.contains("id") || !t["id"].is_number_integer()) return corrupt("added_tokens[{}]: \"id\" must be an integer", k);
        AddedToken token;
        token.content = t["content"].get<std::string>();
        for (auto [key, field] : {std::pair{"single_word", &token.single_word}, std::pair{"lstrip", &token.lstrip},
                                  std::pair{"rstrip", &token.rstrip}, std::pair{"normalized", &token.normalized},
                                  std::pair{"special", &token.special}}) {
            if (!t.contains(key)) continue;
            if (!t[key].is_boolean()) return corrupt("added_tokens[{}].{} must be a boolean", k, key);
            *field = t[key].get<bool>();
        }
        if (!t.contains("normalized")) token.normalized = !token.special;  // AddedToken::from default
        ids.push_back(t["id"].get<int64_t>());
        tokens.push_back(std::move(token));
    }
    return tokens;
}

}  // namespace

struct Tokenizer::Impl {
    BpeModel model;
    AddedVocabulary added;
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;
    std::vector<std::vector<TemplatePiece>> templates;
    int32_t vocab_size = 0;
    // Per id: the token string HF reports and the bytes HF's ByteLevel decoder makes of it.
    std::vector<std::string> token_strings;
    std::vector<uint32_t> bytes_offset;  // bytes of id i: bytes_data[bytes_offset[i], bytes_offset[i + 1])
    std::string bytes_data;
    std::vector<uint8_t> flags;  // kHasId | kSpecial
    static constexpr uint8_t kHasId = 1, kSpecial = 2;

    Status encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& out) const;
    Status encode_plain(std::string_view text, EncodeScratch& s, std::vector<int32_t>& out) const;
};

Expected<Tokenizer> Tokenizer::load_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status(StatusCode::kNotFound, fmt::format("{}: cannot open tokenizer file", path.string()));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (!in.good() && !in.eof()) return Status(StatusCode::kIoError, fmt::format("{}: read failed", path.string()));
    Expected<Tokenizer> t = load_json(buffer.str());
    if (!t) return t.status().with_context(path.string());
    return t;
}

Expected<Tokenizer> Tokenizer::load_json(std::string_view json_text) {
    // nlohmann reports type mismatches by exception; none may leave this function.
    try {
        return load_json_unchecked(json_text);
    } catch (const nlohmann::json::exception& e) {
        return corrupt("tokenizer.json: unexpected value type: {}", e.what());
    }
}

Expected<Tokenizer> Tokenizer::load_json_unchecked(std::string_view json_text) {
    nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return corrupt("tokenizer.json is not valid JSON");
    if (!doc.is_object()) return corrupt("tokenizer.json: expected a JSON object at the top level");
    for (const char* key : {"truncation", "padding"}) {
        if (doc.contains(key) && !doc[key].is_null()) {
            return error(StatusCode::kUnsupported, "tokenizer.json: \"{}\" is set; deepinfer applies neither truncation "
                         "nor padding from tokenizer.json, so ids would differ from HF", key);
        }
    }
    if (!doc.contains("model")) return corrupt("tokenizer.json: missing \"model\"");

    auto impl = std::make_shared<Impl>();
    DI_ASSIGN_OR_RETURN(impl->model, BpeModel::from_json(doc["model"]));
    Expected<Normalizer> normalizer = Normalizer::from_json(doc.value("normalizer", nlohmann::json()));
    if (!normalizer) return normalizer.status().with_context("tokenizer.json");
    impl->normalizer = std::move(normalizer).value();
    Expected<PreTokenizer> pre = PreTokenizer::from_json(doc.value("pre_tokenizer", nlohmann::json()));
    if (!pre) return pre.status().with_context("tokenizer.json");
    impl->pre_tokenizer = std::move(pre).value();
    DI_RETURN_IF_ERROR(check_decoder(doc.value("decoder", nlohmann::json())).with_context("tokenizer.json"));
    DI_RETURN_IF_ERROR(parse_post_processor(doc.value("post_processor", nlohmann::json()), impl->templates)
                           .with_context("tokenizer.json"));

    std::vector<int64_t> json_ids;
    DI_ASSIGN_OR_RETURN(std::vector<AddedToken> tokens, parse_added_tokens(doc.value("added_tokens", nlohmann::json()), json_ids));
    const BpeModel& model = impl->model;
    AddedVocabulary::ModelVocab model_vocab{model.size(), [&model](std::string_view t) { return model.token_to_id(t); }};
    std::vector<std::string> mismatches;
    Expected<AddedVocabulary> added = AddedVocabulary::build(tokens, json_ids, model_vocab, impl->normalizer, &mismatches);
    if (!added) return added.status().with_context("tokenizer.json added_tokens");
    impl->added = std::move(added).value();
    if (!mismatches.empty()) {
        log::warn("tokenizer.json: {} added tokens get other ids than listed (HF assigns them the same way), e.g. {}",
                  mismatches.size(), mismatches.front());
    }

    // Decode tables, one entry per id.
    impl->vocab_size = std::max(model.max_id(), impl->added.max_id()) + 1;
    const auto n = static_cast<size_t>(impl->vocab_size);
    impl->token_strings.resize(n);
    impl->flags.assign(n, 0);
    impl->bytes_offset.assign(n + 1, 0);
    for (size_t id = 0; id < n; ++id) {
        const auto i = static_cast<int32_t>(id);
        impl->bytes_offset[id] = static_cast<uint32_t>(impl->bytes_data.size());
        if (const AddedToken* t = impl->added.token(i)) {
            std::string shown = t->content;  // simple_id_to_token: the normalized form of normalized tokens
            if (t->normalized) DI_RETURN_IF_ERROR(impl->normalizer.normalize(shown));
            impl->token_strings[id] = std::move(shown);
        } else if (const std::string* s = model.id_to_token(i)) {
            impl->token_strings[id] = *s;
        } else {
            continue;
        }
        impl->flags[id] |= Impl::kHasId;
        if (impl->added.is_special_content(impl->token_strings[id])) impl->flags[id] |= Impl::kSpecial;
        symbols_to_bytes(impl->token_strings[id], impl->bytes_data);
    }
    impl->bytes_offset[n] = static_cast<uint32_t>(impl->bytes_data.size());
    for (const auto& templ : impl->templates) {
        for (const TemplatePiece& piece : templ) {
            if (const auto* ids = std::get_if<std::vector<int32_t>>(&piece)) {
                for (int32_t id : *ids) {
                    if (id < 0 || id >= impl->vocab_size || !(impl->flags[id] & Impl::kHasId)) {
                        return corrupt("tokenizer.json post_processor: template id {} is not in the vocabulary", id);
                    }
                }
            }
        }
    }
    return Tokenizer(std::move(impl));
}

Status Tokenizer::Impl::encode_plain(std::string_view text, EncodeScratch& s, std::vector<int32_t>& out) const {
    s.pre_tokens.clear();
    DI_RETURN_IF_ERROR(pre_tokenizer.split(text, s.pre, s.pre_tokens));
    for (std::string_view word : s.pre_tokens) model.encode_word(word, out);
    return Status::ok();
}

Status Tokenizer::Impl::encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& out) const {
    thread_local EncodeScratch s;
    if (!is_valid_utf8(text)) {
        s.repaired = utf8_lossy(text);
        text = s.repaired;
    }
    std::vector<int32_t>& seq = templates.empty() || !add_special_tokens ? out : s.sequence;
    if (&seq == &s.sequence) seq.clear();
    s.raw_segments.clear();
    added.split(text, /*normalized_pass=*/false, s.raw_segments);
    for (const Segment& raw_segment : s.raw_segments) {
        if (raw_segment.id >= 0) {
            seq.push_back(raw_segment.id);
            continue;
        }
        std::string_view piece = text.substr(raw_segment.start, raw_segment.end - raw_segment.start);
        if (!normalizer.is_identity()) {
            s.normalized.assign(piece);
            DI_RETURN_IF_ERROR(normalizer.normalize(s.normalized));
            piece = s.normalized;
        }
        s.normalized_segments.clear();
        added.split(piece, /*normalized_pass=*/true, s.normalized_segments);
        for (const Segment& segment : s.normalized_segments) {
            if (segment.id >= 0) {
                seq.push_back(segment.id);
            } else {
                DI_RETURN_IF_ERROR(encode_plain(piece.substr(segment.start, segment.end - segment.start), s, seq));
            }
        }
    }
    if (&seq == &s.sequence) {
        // Each template wraps the result of the previous processor (Sequence post-processors apply in order).
        std::vector<int32_t> current = std::move(s.sequence), wrapped;
        for (const auto& templ : templates) {
            wrapped.clear();
            for (const TemplatePiece& piece : templ) {
                if (const auto* ids = std::get_if<std::vector<int32_t>>(&piece)) {
                    wrapped.insert(wrapped.end(), ids->begin(), ids->end());
                } else {
                    wrapped.insert(wrapped.end(), current.begin(), current.end());
                }
            }
            current.swap(wrapped);
        }
        out.insert(out.end(), current.begin(), current.end());
        s.sequence = std::move(wrapped);
    }
    return Status::ok();
}

Expected<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
    std::vector<int32_t> ids;
    DI_RETURN_IF_ERROR(impl_->encode(text, add_special_tokens, ids));
    return ids;
}

Status Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out, bool add_special_tokens) const {
    return impl_->encode(text, add_special_tokens, out);
}

Status Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special, std::string& out) const {
    const Impl& m = *impl_;
    for (size_t k = 0; k < ids.size(); ++k) {
        const int32_t id = ids[k];
        if (id < 0 || id >= m.vocab_size || !(m.flags[id] & Impl::kHasId)) {
            return invalid_argument("decode: id {} (position {}) is not a token of this tokenizer (vocabulary size {})",
                                    id, k, m.vocab_size);
        }
        if (skip_special && (m.flags[id] & Impl::kSpecial)) continue;
        out.append(m.bytes_data, m.bytes_offset[id], m.bytes_offset[id + 1] - m.bytes_offset[id]);
    }
    return Status::ok();
}

Expected<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string bytes;
    DI_RETURN_IF_ERROR(decode_bytes(ids, skip_special, bytes));
    if (is_valid_utf8(bytes)) return bytes;
    return utf8_lossy(bytes);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view content) const {
    int32_t id = impl_->added.find(content);
    if (id < 0) id = impl_->model.token_to_id(content);
    if (id < 0) return std::nullopt;
    return id;
}

std::optional<std::string_view> Tokenizer::id_to_token(int32_t id) const {
    if (!has_id(id)) return std::nullopt;
    return std::string_view(impl_->token_strings[id]);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::has_id(int32_t id) const {
    return id >= 0 && id < impl_->vocab_size && (impl_->flags[id] & Impl::kHasId);
}

bool Tokenizer::is_special(int32_t id) const { return has_id(id) && (impl_->flags[id] & Impl::kSpecial); }

std::vector<int32_t> Tokenizer::added_token_ids() const {
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < impl_->vocab_size; ++id) {
        if (impl_->added.token(id)) ids.push_back(id);
    }
    return ids;
}

}  // namespace deepinfer::tokenizer
