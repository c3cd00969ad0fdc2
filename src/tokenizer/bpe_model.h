// The byte-level BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocabulary, merge ranks, and
// the merge loop that turns one pre-token's bytes into ids. Results are memoised per thread (see encode_word).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace deepinfer::tokenizer {

class BpeModel {
   public:
    // Parses the "model" object. Rejects (kUnsupported) dropout, continuing_subword_prefix and
    // end_of_word_suffix, which this family never sets; kCorrupt names the bad vocab entry or merge.
    static Expected<BpeModel> from_json(const nlohmann::json& model);

    // Appends the ids of one pre-token, given as raw bytes (the model sees them as byte-level symbols).
    // Same result as tokenizers' BPE::merge_word: the lowest-ranked adjacent pair is merged first, the
    // leftmost one on ties. Words shorter than 256 bytes are cached per thread.
    void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

    // Token string (byte-level symbols) -> id, or -1.
    int32_t token_to_id(std::string_view token) const;
    // Id -> token string, or nullptr when the vocabulary has no such id.
    const std::string* id_to_token(int32_t id) const;
    // Number of vocabulary entries (tokenizers' get_vocab_size: may differ from max id + 1).
    size_t size() const { return vocab_.size(); }
    int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
    size_t merge_count() const { return merge_count_; }

   private:
    struct MergeTable {
        // Open addressing on (left << 32 | right); rank and merged id per slot.
        std::vector<uint64_t> keys;
        std::vector<uint32_t> ranks;
        std::vector<int32_t> new_ids;
        uint64_t mask = 0;
        void build(size_t n);
        void insert(int32_t left, int32_t right, uint32_t rank, int32_t new_id);  // a later insert wins
        bool find(int32_t left, int32_t right, uint32_t* rank, int32_t* new_id) const;
    };

    void merge_small(std::vector<int32_t>& symbols) const;
    void merge_large(std::vector<int32_t>& symbols) const;
    void initial_symbols(std::string_view bytes, std::vector<int32_t>& symbols) const;

    std::unordered_map<std::string, int32_t> vocab_;
    std::vector<std::string> id_to_token_;
    std::vector<bool> has_id_;
    MergeTable merges_;
    size_t merge_count_ = 0;
    int32_t byte_ids_[256];  // id of each byte's symbol, -1 when missing from the vocabulary
    int32_t unk_id_ = -1;
    bool fuse_unk_ = false;
    bool byte_fallback_ = false;
    bool ignore_merges_ = false;
    int32_t byte_fallback_ids_[256];  // "<0xHH>" tokens, -1 when missing
    uint64_t cache_owner_ = 0;        // identifies this model's entries in the per-thread word cache
};

}  // namespace deepinfer::tokenizer
