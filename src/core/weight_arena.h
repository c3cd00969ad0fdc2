// Storage for many weights laid back to back in large 2 MB-aligned mappings of transparent huge pages.
//
// Why: a decode step streams every weight from memory, and when two cores read 55-60 GB/s a weight whose
// pages are 4 KB streams 15-25% slower than one in 2 MB pages (an fp8 GEMV of 2304 x 5120: 224-236 vs
// 273-349 us, docs/PERFORMANCE.md). A weight in a mapping of its own gets huge pages only for the whole
// 2 MB inside it, and one below AlignedBuffer's mapping threshold none at all; a model has thousands of
// weights of 1-10 MB. Weights carved from an arena share huge pages end to end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"

namespace deepinfer {

class WeightArena {
   public:
    // huge: ask for transparent huge pages (false: ask for 4 KB pages, for comparisons).
    explicit WeightArena(bool huge = true) : huge_(huge) {}

    // `bytes` of zero-filled storage, 64-byte aligned, alive as long as the arena. Not thread-safe.
    uint8_t* allocate(size_t bytes);
    // Bytes handed out so far.
    size_t used() const { return used_; }

   private:
    // Slabs are mapped lazily: pages cost memory only once written. A request above a quarter of a slab gets
    // a slab of its own, so a slab's unused tail stays small against what it holds.
    static constexpr size_t kSlabBytes = size_t{256} << 20;
    bool huge_;
    std::vector<AlignedBuffer> slabs_;      // filled in turn
    std::vector<AlignedBuffer> dedicated_;  // one large request each
    size_t slab_used_ = 0;                  // bytes of slabs_.back() handed out
    size_t used_ = 0;
};

}  // namespace deepinfer
