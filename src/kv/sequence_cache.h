// One sequence's cache state: its block tables into the two pools (spec §6.1 records), the number of
// positions whose records are written, and the pending ratio-2 compressor inputs of recent even
// positions (kept as a small ring so a speculative rollback can restore an odd length).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_pool.h"
#include "kv/cache_layout.h"

namespace deepinfer::kv {

struct KvPools {
    CacheLayout layout;
    BlockPool window;
    BlockPool compressed;
    KvPools(const CacheLayout& l, int32_t n_window_blocks, int32_t n_compressed_blocks)
        : layout(l), window(l.window_block_bytes, n_window_blocks), compressed(l.compressed_block_bytes, n_compressed_blocks) {}
};

class SequenceCache {
   public:
    explicit SequenceCache(const CacheLayout& layout);

    // Make sure blocks exist for positions [0, end); false (nothing changed) when a pool is exhausted.
    bool ensure_blocks(KvPools& pools, int64_t end);
    // Release window blocks that no position >= keep_from can read (positions < keep_from - window).
    void release_old_window_blocks(KvPools& pools, int64_t keep_from);
    // Release every block (the sequence is finished or preempted).
    void release_all(KvPools& pools);
    // Forget positions >= length (speculative rollback); blocks stay allocated.
    void truncate(int64_t length);

    int64_t length() const { return length_; }
    void set_length(int64_t length) { length_ = length; }

    // Record addresses. Blocks must exist (ensure_blocks).
    uint8_t* window_record(KvPools& pools, int layer, int64_t pos) const;
    uint8_t* compressed_record(KvPools& pools, int source, int64_t entry) const;
    uint8_t* index_record(KvPools& pools, int source, int64_t entry) const;

    // Pending ratio-2 compressor input (u then g, fp32 [2, head_dim]) of even position pos of a source.
    float* compressor_slot(int source, int64_t pos);
    // The stored slot for pos, or nullptr if it was overwritten or never written.
    const float* find_compressor_slot(int source, int64_t pos) const;

    const std::vector<int32_t>& window_blocks() const { return window_blocks_; }
    const std::vector<int32_t>& compressed_blocks() const { return compressed_blocks_; }
    std::vector<int32_t>& mutable_window_blocks() { return window_blocks_; }
    std::vector<int32_t>& mutable_compressed_blocks() { return compressed_blocks_; }

   private:
    const CacheLayout* layout_;
    std::vector<int32_t> window_blocks_;      // -1 where released
    std::vector<int32_t> compressed_blocks_;
    int64_t length_ = 0;
    std::vector<float> compressor_ring_;      // [sources][ring][2 * head_dim]
    std::vector<int64_t> compressor_ring_pos_;
};

}  // namespace deepinfer::kv
