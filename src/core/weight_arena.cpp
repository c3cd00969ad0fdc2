// WeightArena: bump allocation over 2 MB-aligned slabs (AlignedBuffer maps large buffers that way).
#include "core/weight_arena.h"

namespace deepinfer {

uint8_t* WeightArena::allocate(size_t bytes) {
    const size_t align = AlignedBuffer::kAlignment, rounded = (bytes + align - 1) / align * align;
    auto map = [&](size_t size) { return AlignedBuffer(size, huge_ ? Pages::kHuge : Pages::kSmall); };
    used_ += rounded;
    if (rounded > kSlabBytes / 4) {
        dedicated_.push_back(map(rounded));
        return dedicated_.back().data();
    }
    if (slabs_.empty() || slab_used_ + rounded > slabs_.back().size()) {
        slabs_.push_back(map(kSlabBytes));
        slab_used_ = 0;
    }
    uint8_t* p = slabs_.back().data() + slab_used_;
    slab_used_ += rounded;
    return p;
}

}  // namespace deepinfer
