// A small deterministic BPE trainer (classic Sennrich et al. merging by pair frequency), used to build the
// synthetic tokenizer's merges from its built-in training text.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::tokenizer {

struct BpeTrainingResult {
    std::vector<std::pair<std::string, std::string>> merges;  // byte strings, in rank order
    std::vector<std::string> new_tokens;                      // byte strings, in creation order
};

// Starts from the 256 single bytes and repeatedly merges the most frequent adjacent pair over `word_counts`
// (ties: the pair whose (left, right) byte strings sort first), until `max_new_tokens` tokens were created
// or no word has two symbols left. A merge whose result already exists adds a merge but no token.
BpeTrainingResult train_bpe(const std::map<std::string, int64_t>& word_counts, size_t max_new_tokens);

}  // namespace deepinfer::tokenizer
