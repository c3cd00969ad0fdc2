// AlignedBuffer's large mappings start on a 2 MB boundary, and WeightArena lays weights back to back in such
// mappings (a large request in one of its own), zero-filled and without overlap.
#include "core/weight_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace deepinfer {
namespace {

constexpr uintptr_t kHuge = uintptr_t{2} << 20;

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

bool all_zero(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (p[i] != 0) return false;
    return true;
}

TEST(AlignedBuffer, LargeBuffersStartOnA2MBBoundary) {
    for (size_t bytes : {size_t{4} << 20, (size_t{5} << 20) + 123, size_t{37} << 20}) {
        AlignedBuffer b(bytes);
        EXPECT_EQ(addr(b.data()) % kHuge, 0u) << bytes;
        EXPECT_EQ(b.size(), bytes);
        EXPECT_TRUE(all_zero(b.data(), bytes));
        std::memset(b.data(), 0xab, bytes);  // the whole buffer is mapped and writable
        b.allocate(bytes / 2);               // re-allocation releases the old mapping
        EXPECT_TRUE(all_zero(b.data(), bytes / 2));
    }
    AlignedBuffer small(1000);  // heap-allocated: 64-byte alignment only
    EXPECT_EQ(addr(small.data()) % AlignedBuffer::kAlignment, 0u);
}

TEST(WeightArena, SmallRequestsBackToBackFromA2MBBoundary) {
    WeightArena arena;
    const std::vector<size_t> sizes = {1000, 64, 5 << 20, 1, 3 << 20, 100};
    std::vector<uint8_t*> ptrs;
    size_t expect_used = 0;
    for (size_t s : sizes) {
        uint8_t* p = arena.allocate(s);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(addr(p) % AlignedBuffer::kAlignment, 0u);
        EXPECT_TRUE(all_zero(p, s));
        std::memset(p, static_cast<int>(ptrs.size() + 1), s);
        if (ptrs.empty()) EXPECT_EQ(addr(p) % kHuge, 0u);
        else EXPECT_EQ(p, ptrs.back() + (sizes[ptrs.size() - 1] + 63) / 64 * 64);  // contiguous
        ptrs.push_back(p);
        expect_used += (s + 63) / 64 * 64;
    }
    EXPECT_EQ(arena.used(), expect_used);
    for (size_t i = 0; i < sizes.size(); ++i)  // no request wrote over another
        for (size_t j : {size_t{0}, sizes[i] - 1}) EXPECT_EQ(ptrs[i][j], static_cast<uint8_t>(i + 1)) << i;
}

TEST(WeightArena, LargeRequestsGetTheirOwnMappingAndSlabsRollOver) {
    WeightArena arena(/*huge=*/false);
    uint8_t* a = arena.allocate(1 << 20);
    uint8_t* big = arena.allocate(size_t{80} << 20);  // above a quarter of a slab
    uint8_t* b = arena.allocate(1 << 20);
    EXPECT_EQ(addr(big) % kHuge, 0u);
    EXPECT_EQ(b, a + (1 << 20));  // the shared slab goes on where it stopped
    // fill the slab past its end: the request that does not fit starts a new slab on a 2 MB boundary
    std::vector<uint8_t*> more;
    for (int i = 0; i < 6; ++i) more.push_back(arena.allocate(size_t{50} << 20));
    int fresh = 0;
    for (size_t i = 1; i < more.size(); ++i)
        if (more[i] != more[i - 1] + (size_t{50} << 20)) {
            ++fresh;
            EXPECT_EQ(addr(more[i]) % kHuge, 0u);
        }
    EXPECT_GE(fresh, 1);
    EXPECT_EQ(arena.used(), (size_t{2} << 20) + (size_t{80} << 20) + 6 * (size_t{50} << 20));
    big[(size_t{80} << 20) - 1] = 1;  // the whole large request is writable
}

}  // namespace
}  // namespace deepinfer
