// A fixed pool of equal-sized, reference-counted blocks (the unit of KV memory). Blocks are shared by
// sequences through prefix caching, hence the reference counts; a block returns to the free list when
// its count drops to zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"

namespace deepinfer::kv {

class BlockPool {
   public:
    BlockPool() = default;
    BlockPool(size_t block_bytes, int32_t n_blocks);

    // A free block with reference count 1, or -1 when the pool is exhausted.
    int32_t allocate();
    void retain(int32_t block);
    // Drop one reference; the block is free again at zero.
    void release(int32_t block);

    uint8_t* data(int32_t block) { return storage_.data() + static_cast<size_t>(block) * block_bytes_; }
    const uint8_t* data(int32_t block) const { return storage_.data() + static_cast<size_t>(block) * block_bytes_; }
    int32_t refcount(int32_t block) const { return refcounts_[block]; }
    int32_t capacity() const { return static_cast<int32_t>(refcounts_.size()); }
    int32_t free_count() const { return static_cast<int32_t>(free_.size()); }
    int32_t used_count() const { return capacity() - free_count(); }
    size_t block_bytes() const { return block_bytes_; }

   private:
    size_t block_bytes_ = 0;
    AlignedBuffer storage_;
    std::vector<int32_t> refcounts_;
    std::vector<int32_t> free_;  // stack: last freed is reused first (warm in cache)
};

}  // namespace deepinfer::kv
