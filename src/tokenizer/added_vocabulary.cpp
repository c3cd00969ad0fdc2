// Added-token id assignment and matching (see added_vocabulary.h); follows tokenizers'
// tokenizer/added_vocabulary.rs (add_tokens, refresh_added_tokens, find_matches).
#include "tokenizer/added_vocabulary.h"

#include <fmt/format.h>
#include <unicode/uchar.h>

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// Rust regex's Unicode \w, used by single_word: Alphabetic, marks, decimal digits, connector punctuation,
// join controls.
bool is_word_char(char32_t cp) {
    const auto c = static_cast<UChar32>(cp);
    return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
           u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

bool is_space(char32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)); }

// Start of the code point that ends just before byte `end`.
size_t previous_char(std::string_view s, size_t end) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    return start;
}

}  // namespace

Status AddedVocabulary::Trie::insert(std::string_view pattern, int32_t id) {
    if (pattern.empty()) return corrupt("added token {} has an empty matching pattern", id);
    int32_t node = 0;
    for (char ch : pattern) {
        const auto b = static_cast<uint8_t>(ch);
        auto& children = nodes[node].children;
        auto it = std::find_if(children.begin(), children.end(), [b](const auto& c) { return c.first == b; });
        if (it != children.end()) {
            node = it->second;
        } else {
            nodes[node].children.push_back({b, static_cast<int32_t>(nodes.size())});
            node = static_cast<int32_t>(nodes.size());
            nodes.emplace_back();
        }
    }
    if (nodes[node].id >= 0) {
        return corrupt("added tokens {} and {} match the same text \"{}\"", nodes[node].id, id, pattern);
    }
    nodes[node].id = id;
    first_byte[static_cast<uint8_t>(pattern[0])] = true;
    return Status::ok();
}

std::pair<int32_t, size_t> AddedVocabulary::Trie::longest(std::string_view text, size_t pos) const {
    std::pair<int32_t, size_t> best{-1, 0};
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
        const auto b = static_cast<uint8_t>(text[i]);
        const auto& children = nodes[node].children;
        auto it = std::find_if(children.begin(), children.end(), [b](const auto& c) { return c.first == b; });
        if (it == children.end()) break;
        node = it->second;
        if (nodes[node].id >= 0) best = {nodes[node].id, i + 1 - pos};
    }
    return best;
}

Expected<AddedVocabulary> AddedVocabulary::build(const std::vector<AddedToken>& tokens, const std::vector<int64_t>& json_ids,
                                                 const ModelVocab& model, const Normalizer& normalizer,
                                                 std::vector<std::string>* mismatches) {
    AddedVocabulary v;
    // tokenizers computes the next free id once, before adding (add_tokens): the model size, as nothing was
    // added yet when a tokenizer.json is loaded.
    int64_t next_id = static_cast<int64_t>(model.size);
    for (size_t k = 0; k < tokens.size(); ++k) {
        const AddedToken& token = tokens[k];
        if (token.content.empty()) continue;
        auto known = v.by_content_.find(token.content);
        if (known != v.by_content_.end() && v.by_id_.count(known->second) && v.by_id_.at(known->second) == token) continue;
        int32_t id = known != v.by_content_.end() ? known->second : model.find(token.content);
        if (id < 0) {
            if (next_id > INT32_MAX) return corrupt("added_tokens[{}]: id space exhausted", k);
            id = static_cast<int32_t>(next_id++);
        }
        if (mismatches && k < json_ids.size() && json_ids[k] != id) {
            mismatches->push_back(fmt::format("\"{}\" is listed with id {} but gets id {}", token.content, json_ids[k], id));
        }
        v.by_content_[token.content] = id;
        if (token.special) v.special_contents_.insert(token.content);
        v.by_id_[id] = token;
        v.max_id_ = std::max(v.max_id_, id);
    }
    // Tries from the final id -> token map (refresh_added_tokens); normalized tokens match by their normalized
    // form. Insertion in id order keeps error messages deterministic.
    std::vector<int32_t> ids;
    for (const auto& [id, token] : v.by_id_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (int32_t id : ids) {
        const AddedToken& token = v.by_id_.at(id);
        if (token.normalized) {
            std::string pattern = token.content;
            DI_RETURN_IF_ERROR(normalizer.normalize(pattern));
            DI_RETURN_IF_ERROR(v.normalized_trie_.insert(pattern, id));
        } else {
            DI_RETURN_IF_ERROR(v.raw_trie_.insert(token.content, id));
        }
    }
    return v;
}

void AddedVocabulary::split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const {
    const Trie& trie = normalized_pass ? normalized_trie_ : raw_trie_;
    const auto n = static_cast<uint32_t>(text.size());
    uint32_t start_offset = 0;  // end of the previous accepted match
    size_t pos = 0;
    while (pos < n) {
        if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
            ++pos;
            continue;
        }
        auto [id, len] = trie.longest(text, pos);
        if (id < 0) {
            ++pos;
            continue;
        }
        size_t start = pos, stop = pos + len;
        pos = stop;  // matches never overlap, even when this one is rejected below
        const AddedToken& token = by_id_.at(id);
        if (token.single_word) {
            bool start_space = true, stop_space = true;
            if (start > 0) {
                size_t p = previous_char(text, start);
                start_space = !is_word_char(next_codepoint(text, p));
            }
            if (stop < n) {
                size_t p = stop;
                stop_space = !is_word_char(next_codepoint(text, p));
            }
            if (!start_space || !stop_space) continue;
        }
        if (token.lstrip) {
            size_t new_start = start;
            while (new_start > 0) {
                size_t p = previous_char(text, new_start), q = p;
                if (!is_space(next_codepoint(text, q))) break;
                new_start = p;
            }
            start = std::max<size_t>(new_start, start_offset);
        }
        if (token.rstrip) {
            while (stop < n) {
                size_t q = stop;
                if (!is_space(next_codepoint(text, q))) break;
                stop = q;
            }
            // The scan resumes at the end of the match proper, as tokenizers' matcher iteration does.
        }
        if (start_offset < start) out.push_back({start_offset, static_cast<uint32_t>(start), -1});
        out.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), id});
        start_offset = static_cast<uint32_t>(stop);
    }
    if (start_offset < n) out.push_back({start_offset, n, -1});
}

int32_t AddedVocabulary::find(std::string_view content) const {
    auto it = by_content_.find(std::string(content));
    return it == by_content_.end() ? -1 : it->second;
}

const AddedToken* AddedVocabulary::token(int32_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : &it->second;
}

bool AddedVocabulary::is_special_content(std::string_view content) const {
    return special_contents_.count(std::string(content)) > 0;
}

}  // namespace deepinfer::tokenizer
