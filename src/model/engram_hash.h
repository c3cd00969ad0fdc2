// Engram n-gram hashing (spec §5.5.1): prime-sized bucket ranges per (layer, n-gram order, head), their
// offsets, the per-layer odd multipliers, and the row ids of the n-grams ending at one position.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::model {

struct ModelConfig;

inline constexpr int32_t kEngramDead = -1;  // compressed id of an image-span token: cuts every n-gram

struct EngramLayout {
    int max_ngram_size = 0;
    int n_heads = 0;
    int n_cols = 0;                                 // (max_ngram_size - 1) * n_heads
    std::vector<std::vector<int64_t>> primes;       // [layer][col], col = n_heads*(order-2) + head
    std::vector<std::vector<int64_t>> offsets;      // [layer][col], exclusive prefix sums of primes
    std::vector<int64_t> table_rows;                // [layer] sum of primes
    std::vector<std::vector<int64_t>> multipliers;  // [layer][shift], odd
};

// Primes, offsets and table sizes from engram_vocab_size; multipliers from engram_compressed_vocab_size
// and the layer ids (numpy default_rng(10007 * layer_id), spec §5.5.1).
EngramLayout make_engram_layout(const ModelConfig& config);

// Row ids (absolute rows of the layer's table) of the n-grams ending at position t.
// `history(s)` must return the compressed id at position t - s for s = 0..max_ngram_size-1 with t - s >= 0.
// pad_cid is token_map[engram_pad_token_id].
template <typename History>
void engram_row_ids(const EngramLayout& layout, int layer_index, int64_t t, int32_t pad_cid, History&& history,
                    int64_t* out) {
    const auto& mult = layout.multipliers[layer_index];
    bool blocked = false;
    int64_t rolling = 0;
    for (int s = 0; s < layout.max_ngram_size; ++s) {
        int32_t source = t >= s ? history(s) : 0;
        blocked = blocked || t < s || source == kEngramDead;
        int64_t token = blocked ? pad_cid : source;
        int64_t product = token * mult[s];  // non-negative, cannot overflow (multiplier bound)
        rolling = s == 0 ? product : (rolling ^ product);
        if (s == 0) continue;
        for (int h = 0; h < layout.n_heads; ++h) {
            int col = (s - 1) * layout.n_heads + h;
            out[col] = layout.offsets[layer_index][col] + rolling % layout.primes[layer_index][col];
        }
    }
}

bool is_prime(int64_t n);

}  // namespace deepinfer::model
