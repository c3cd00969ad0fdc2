// Deterministic BPE training (see bpe_trainer.h). Recounts all pairs per merge: the training text is a few
// KB, so simplicity wins over the incremental bookkeeping large trainers need.
#include "tokenizer/bpe_trainer.h"

#include <unordered_map>

namespace deepinfer::tokenizer {

BpeTrainingResult train_bpe(const std::map<std::string, int64_t>& word_counts, size_t max_new_tokens) {
    std::vector<std::string> token_bytes;
    std::unordered_map<std::string, int32_t> token_index;
    for (int b = 0; b < 256; ++b) {
        token_bytes.emplace_back(1, static_cast<char>(b));
        token_index[token_bytes.back()] = b;
    }
    std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
    for (const auto& [word, count] : word_counts) {
        std::vector<int32_t> symbols;
        for (char c : word) symbols.push_back(static_cast<uint8_t>(c));
        words.push_back({std::move(symbols), count});
    }

    BpeTrainingResult result;
    std::unordered_map<uint64_t, int64_t> counts;
    while (result.new_tokens.size() < max_new_tokens) {
        counts.clear();
        for (const auto& [symbols, count] : words) {
            for (size_t i = 0; i + 1 < symbols.size(); ++i) {
                counts[(static_cast<uint64_t>(symbols[i]) << 32) | static_cast<uint32_t>(symbols[i + 1])] += count;
            }
        }
        if (counts.empty()) break;
        uint64_t best = 0;
        int64_t best_count = -1;
        for (const auto& [key, count] : counts) {
            if (count < best_count) continue;
            if (count == best_count) {
                const auto& bl = token_bytes[best >> 32];
                const auto& br = token_bytes[best & 0xFFFFFFFF];
                const auto& kl = token_bytes[key >> 32];
                const auto& kr = token_bytes[key & 0xFFFFFFFF];
                if (std::tie(kl, kr) >= std::tie(bl, br)) continue;
            }
            best = key;
            best_count = count;
        }
        const auto left = static_cast<int32_t>(best >> 32), right = static_cast<int32_t>(best & 0xFFFFFFFF);
        const std::string merged = token_bytes[left] + token_bytes[right];
        result.merges.push_back({token_bytes[left], token_bytes[right]});
        int32_t merged_id;
        if (auto it = token_index.find(merged); it != token_index.end()) {
            merged_id = it->second;
        } else {
            merged_id = static_cast<int32_t>(token_bytes.size());
            token_bytes.push_back(merged);
            token_index[merged] = merged_id;
            result.new_tokens.push_back(merged);
        }
        for (auto& [symbols, count] : words) {
            size_t out = 0;
            for (size_t i = 0; i < symbols.size(); ++i) {
                if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
                    symbols[out++] = merged_id;
                    ++i;
                } else {
                    symbols[out++] = symbols[i];
                }
            }
            symbols.resize(out);
        }
    }
    return result;
}

}  // namespace deepinfer::tokenizer
