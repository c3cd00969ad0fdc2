// The scratch pool hands a released block to the next request of about its size, keeps at most
// kMaxIdleBytes idle; ScratchVector sets only the elements it is given a value for.
#include "core/scratch_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

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

TEST(ScratchPool, ThreadsNeverShareABlock) {
    // Threads take and give back blocks of a few sizes at once (the forward's row loops allocate on the pool's
    // threads); each fills its block with its own byte and checks it before giving it back.
    scratch_pool::trim();
    constexpr int kThreads = 4, kRounds = 40;
    std::atomic<int> clashes{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([t, &clashes] {
            for (int r = 0; r < kRounds; ++r) {
                const size_t bytes = (4 + (t + r) % 3 * 2) * kMB;
                auto* p = static_cast<uint8_t*>(scratch_pool::acquire(bytes));
                const auto mark = static_cast<uint8_t>(16 * t + r % 16);
                std::memset(p, mark, bytes);
                std::this_thread::yield();
                for (size_t i = 0; i < bytes; i += 4096)
                    if (p[i] != mark) clashes.fetch_add(1);
                scratch_pool::release(p);
            }
        });
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(clashes.load(), 0);
    const scratch_pool::Stats s = scratch_pool::stats();
    EXPECT_EQ(s.in_use_blocks, 0u);
    EXPECT_GT(s.reused, 0u);
    scratch_pool::trim();
}

TEST(ScratchVector, FillsOnlyWhatItIsGiven) {
    scratch_pool::trim();
    const size_t n = 3 * scratch_pool::kPooledBytes / sizeof(float);
    const float* first = nullptr;
    {
        ScratchVector<float> v(n, 1.5f);  // with a value: every element set
        first = v.data();
        for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], 1.5f) << i;
    }
    {
        ScratchVector<float> zeros(n, 0.0f);
#if !defined(__SANITIZE_ADDRESS__)
        EXPECT_EQ(zeros.data(), first);  // the pooled block again (under ASan vectors stay on the heap)
#endif
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(zeros[i], 0.0f) << i;
    }
    ScratchVector<float> unset(n);  // without one: left as the storage was (the last user's 0s, or ASan's NaNs)
#if defined(__SANITIZE_ADDRESS__)
    EXPECT_TRUE(std::isnan(unset[0]) && std::isnan(unset[n - 1]));
#else
    EXPECT_EQ(unset.data(), first);
    EXPECT_EQ(unset[n - 1], 0.0f);
#endif
    ScratchVector<int> tiny(10, 7);  // below the pooled size: an ordinary allocation
    EXPECT_EQ(tiny[9], 7);
}

}  // namespace
}  // namespace deepinfer
