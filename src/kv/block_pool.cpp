// Reference-counted block pool.
#include "kv/block_pool.h"

#include "core/check.h"

namespace deepinfer::kv {

BlockPool::BlockPool(size_t block_bytes, int32_t n_blocks)
    : block_bytes_(block_bytes), storage_(block_bytes * static_cast<size_t>(n_blocks)), refcounts_(n_blocks, 0) {
    free_.reserve(n_blocks);
    for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockPool::allocate() {
    if (free_.empty()) return -1;
    int32_t block = free_.back();
    free_.pop_back();
    refcounts_[block] = 1;
    return block;
}

void BlockPool::retain(int32_t block) {
    DI_CHECK_MSG(refcounts_[block] > 0, "retain of free block {}", block);
    ++refcounts_[block];
}

void BlockPool::release(int32_t block) {
    DI_CHECK_MSG(refcounts_[block] > 0, "release of free block {}", block);
    if (--refcounts_[block] == 0) free_.push_back(block);
}

}  // namespace deepinfer::kv
