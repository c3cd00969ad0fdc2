// The scratch pool hands a released block to the next request of about its size, keeps at most
// kMaxIdleBytes idle, and ScratchVector zero-fills what it takes from it like std::vector.
#include "core/scratch_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace deepinfer {
namespace {

constexpr size_t kMB = size_t{1} << 20;

TEST(ScratchPool, ReleasedBlocksServeTheNextRequestOfTheirSize) {
    scratch_pool::trim();
    const scratch_pool::Stats before = scratch_pool::stats();
    void* a = scratch_pool::acquire(40 * kMB + 123);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    std::memset(a, 0x5a, 40 * kMB + 123);  // all of it is writable
    scratch_pool::release(a);
    EXPECT_EQ(scratch_pool::stats().idle_blocks, 1u);
    void* b = scratch_pool::acquire(40 * kMB);  // the same size class: the same block
    EXPECT_EQ(b, a);
    void* c = scratch_pool::acquire(40 * kMB);  // the block is in use: a new one
    EXPECT_NE(c, a);
    scratch_pool::release(b);
    scratch_pool::release(c);
    void* small = scratch_pool::acquire(8 * kMB);  // far smaller than both idle blocks: not given one of them
    EXPECT_NE(small, a);
    EXPECT_NE(small, c);
    scratch_pool::release(small);
    const scratch_pool::Stats after = scratch_pool::stats();
    EXPECT_EQ(after.mapped - before.mapped, 3u);
    EXPECT_EQ(after.reused - before.reused, 1u);
    EXPECT_EQ(after.in_use_blocks, before.in_use_blocks);
    scratch_pool::trim();
    EXPECT_EQ(scratch_pool::stats().idle_bytes, 0u);
}

TEST(ScratchPool, KeepsAtMostTheIdleLimitEvictingTheOldest) {
    scratch_pool::trim();
    const size_t block = 512 * kMB, count = scratch_pool::kMaxIdleBytes / block + 2;
    std::vector<void*> blocks;
    for (size_t i = 0; i < count; ++i) blocks.push_back(scratch_pool::acquire(block));  // mapped, not touched
    for (void* b : blocks) scratch_pool::release(b);
    const scratch_pool::Stats s = scratch_pool::stats();
    EXPECT_LE(s.idle_bytes, scratch_pool::kMaxIdleBytes);
    EXPECT_EQ(s.idle_blocks, scratch_pool::kMaxIdleBytes / block);
    // the first released were unmapped; the last one is still there
    EXPECT_EQ(scratch_pool::acquire(block), blocks.back());
    scratch_pool::release(blocks.back());
    scratch_pool::trim();
}

TEST(ScratchVector, ZeroFillsReusedBlocks) {
    scratch_pool::trim();
    const size_t n = 3 * scratch_pool::kPooledBytes / sizeof(float);
    const float* first = nullptr;
    {
        ScratchVector<float> v(n);
        first = v.data();
        for (float& x : v) x = 1.5f;
    }
    ScratchVector<float> w(n);
#if !defined(__SANITIZE_ADDRESS__)
    EXPECT_EQ(w.data(), first);  // the pooled block again (under ASan vectors stay on the heap)
#endif
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[i], 0.0f) << i;
    ScratchVector<int> tiny(10, 7);  // below the pooled size: an ordinary allocation
    EXPECT_EQ(tiny[9], 7);
}

}  // namespace
}  // namespace deepinfer
