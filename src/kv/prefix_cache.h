// Prefix caching of KV blocks (exact: a hit resumes from cached records that equal a recompute, since every
// row is computed independently of its chunk). A cached prefix of m blocks needs the compressed blocks
// 0..m-1 and the window blocks that positions >= m*T read (the last ceil(window/T) blocks before the hit).
// Blocks are keyed by a chain hash of their tokens; entries hold a pool reference and are evicted LRU
// when the pools run short. Block boundaries are multiples of an even T, so no ratio-2 compressor state
// is pending at a hit point.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "kv/sequence_cache.h"

namespace deepinfer::kv {

// Chain hash of full blocks: hashes[i] covers tokens [0, (i+1)*T). Extends `hashes` with the blocks of
// tokens[0, n_tokens) it does not cover yet.
void extend_block_hashes(const int32_t* tokens, int64_t n_tokens, int block_tokens, uint64_t salt,
                         std::vector<uint64_t>* hashes);

class PrefixCache {
   public:
    explicit PrefixCache(KvPools& pools) : pools_(pools) {}

    // Longest usable prefix (in blocks, at most max_blocks) of a sequence whose full-block hashes are given;
    // on a hit, the sequence's block tables are filled (with references taken) and its length set.
    int64_t attach(const std::vector<uint64_t>& hashes, int64_t max_blocks, SequenceCache* cache);
    // Register the sequence's full, computed blocks [0, n_blocks) (no-op for blocks already cached).
    void insert(const std::vector<uint64_t>& hashes, int64_t n_blocks, const SequenceCache& cache);
    // Drop least-recently-used entries whose blocks nobody else holds until `window` / `compressed` blocks
    // are free in the pools (or nothing is left to evict). Returns true if the goal was reached.
    bool evict_for(int32_t window, int32_t compressed);
    void clear();

    int64_t hits() const { return hits_; }
    int64_t queries() const { return queries_; }
    int64_t hit_tokens() const { return hit_tokens_; }
    int64_t query_tokens() const { return query_tokens_; }
    size_t cached_compressed_blocks() const { return compressed_.size(); }
    size_t cached_window_blocks() const { return window_.size(); }

   private:
    struct Entry {
        int32_t block;
        std::list<uint64_t>::iterator lru;
    };
    using Table = std::unordered_map<uint64_t, Entry>;
    void touch(Table& table, std::list<uint64_t>& lru, uint64_t hash);
    bool evict_one(Table& table, std::list<uint64_t>& lru, BlockPool& pool);

    KvPools& pools_;
    Table compressed_, window_;
    std::list<uint64_t> compressed_lru_, window_lru_;  // front = most recent
    int64_t hits_ = 0, queries_ = 0, hit_tokens_ = 0, query_tokens_ = 0;
};

}  // namespace deepinfer::kv
