// Engram hash layout (spec §5.5.1, reference engram.py EngramLayout / compute_hash_multipliers).
#include "model/engram_hash.h"

#include <set>

#include "model/config.h"
#include "model/numpy_random.h"

namespace deepinfer::model {

bool is_prime(int64_t n) {
    if (n < 2) return false;
    if (n % 2 == 0) return n == 2;
    for (int64_t d = 3; d * d <= n; d += 2)
        if (n % d == 0) return false;
    return true;
}

EngramLayout make_engram_layout(const ModelConfig& config) {
    EngramLayout layout;
    layout.max_ngram_size = config.engram_max_ngram_size;
    layout.n_heads = config.engram_n_heads;
    layout.n_cols = (layout.max_ngram_size - 1) * layout.n_heads;
    std::set<int64_t> seen;
    for (size_t l = 0; l < config.engram_layer_ids.size(); ++l) {
        std::vector<int64_t> primes, offsets;
        int64_t total = 0;
        for (int order = 0; order < layout.max_ngram_size - 1; ++order) {
            // Each (layer, order) restarts the search at engram_vocab_size - 1; primes are never reused.
            int64_t current = config.engram_vocab_size - 1;
            for (int h = 0; h < layout.n_heads; ++h) {
                int64_t candidate = current + 1;
                while (!is_prime(candidate) || seen.count(candidate)) ++candidate;
                seen.insert(candidate);
                current = candidate;
                offsets.push_back(total);
                primes.push_back(candidate);
                total += candidate;
            }
        }
        layout.primes.push_back(primes);
        layout.offsets.push_back(offsets);
        layout.table_rows.push_back(total);
        // Multipliers: odd, bounded so that id * multiplier fits int64 (engram.py compute_hash_multipliers).
        const int64_t vocab = std::max<int64_t>(1, config.engram_compressed_vocab_size);
        const int64_t bound = std::max<int64_t>(1, (INT64_MAX / vocab) / 2);
        NumpyPcg64 rng(static_cast<uint64_t>(10007) * static_cast<uint64_t>(config.engram_layer_ids[l]));
        std::vector<int64_t> mult = rng.integers(bound, layout.max_ngram_size);
        for (auto& m : mult) m = m * 2 + 1;
        layout.multipliers.push_back(mult);
    }
    return layout;
}

}  // namespace deepinfer::model
