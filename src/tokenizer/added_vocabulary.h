// Added tokens of tokenizer.json ("added_tokens"): id assignment, and the two matching passes that cut them
// out of the input before normalization and BPE, as tokenizers' AddedVocabulary does: tokens with
// normalized=false are matched in the raw text, tokens with normalized=true in each remaining piece after
// the normalizer ran. Matching is leftmost-longest, non-overlapping; single_word/lstrip/rstrip are honoured.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

class Normalizer;

struct AddedToken {
    std::string content;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = true;
    bool special = false;
    bool operator==(const AddedToken&) const = default;
};

// A piece of text after matching: either an added token (id >= 0) or plain text (id == -1).
struct Segment {
    uint32_t start = 0;
    uint32_t end = 0;
    int32_t id = -1;
};

class AddedVocabulary {
   public:
    // How a model vocabulary answers during id assignment.
    struct ModelVocab {
        size_t size;                                    // number of entries (tokenizers' get_vocab_size)
        std::function<int32_t(std::string_view)> find;  // token -> id or -1
    };

    // Adds `tokens` in order with tokenizers' AddedVocabulary::add_tokens rules: a content already known
    // (as an added token or in the model vocabulary) keeps that id; others get consecutive ids from
    // max(model size, largest added id + 1). The ids written in tokenizer.json are not used for assignment
    // (HF only warns when they disagree); `json_ids`, when given, are compared and mismatches reported in
    // `mismatches`.
    static Expected<AddedVocabulary> build(const std::vector<AddedToken>& tokens, const std::vector<int64_t>& json_ids,
                                           const ModelVocab& model, const Normalizer& normalizer,
                                           std::vector<std::string>* mismatches);

    // Cuts `text` into segments with the non-normalized (first pass) or normalized (second pass) tokens.
    // Segments cover the text in order; empty plain segments are omitted.
    void split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const;

    int32_t find(std::string_view content) const;   // id of an added token's content, or -1
    const AddedToken* token(int32_t id) const;      // the added token at id, or nullptr
    bool is_special_content(std::string_view content) const;
    int32_t max_id() const { return max_id_; }
    size_t size() const { return by_id_.size(); }

   private:
    // Byte trie over token patterns for leftmost-longest matching.
    struct Trie {
        struct Node {
            int32_t id = -1;  // token ending here
            std::vector<std::pair<uint8_t, int32_t>> children;
        };
        std::vector<Node> nodes{1};
        std::array<bool, 256> first_byte{};
        Status insert(std::string_view pattern, int32_t id);
        // Longest pattern starting at text[pos]: its id and length, or id -1.
        std::pair<int32_t, size_t> longest(std::string_view text, size_t pos) const;
    };

    std::unordered_map<std::string, int32_t> by_content_;
    std::unordered_map<int32_t, AddedToken> by_id_;
    std::unordered_set<std::string> special_contents_;
    Trie raw_trie_, normalized_trie_;
    int32_t max_id_ = -1;
};

}  // namespace deepinfer::tokenizer
