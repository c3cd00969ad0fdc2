// Owned, 64-byte aligned, zero-initialised byte buffers: the storage under tensors, caches and scratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>
#include <utility>

namespace deepinfer {

// Page size advice for a large buffer's mapping (kMapThreshold and up; smaller buffers live on the heap).
enum class Pages { kHuge, kSmall };

class AlignedBuffer {
   public:
    static constexpr size_t kAlignment = 64;

    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t bytes, Pages pages = Pages::kHuge) { allocate(bytes, pages); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    AlignedBuffer(AlignedBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
          mapped_(std::exchange(other.mapped_, 0)) {}
    AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
        if (this != &other) {
            release();
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
            mapped_ = std::exchange(other.mapped_, 0);
        }
        return *this;
    }
    ~AlignedBuffer() { release(); }

    // Reallocate to `bytes` (contents are not kept), zero-filled. Large buffers (KV pools, packed weights) are
    // anonymous mappings: the kernel zero-fills pages on first touch, so a big pool costs nothing until used.
    // By default they ask for transparent huge pages (where THP is in "madvise" mode): multi-MB weight streams
    // then cross fewer TLB entries and page-boundary prefetch stops (bench-ops: ~10-15% on the decode GEMVs).
    // Pages::kSmall asks for 4 KB pages instead (no page is touched before the advice).
    void allocate(size_t bytes, Pages pages = Pages::kHuge) {
        release();
        size_ = bytes;
        if (bytes == 0) return;
        size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
        if (rounded >= kMapThreshold) {
            // Mapped to start on a 2 MB boundary (over-mapped by 2 MB, the slack unmapped), so that every whole
            // 2 MB of the buffer can be a huge page: at a plain page boundary the first and last partial 2 MB
            // stay in 4 KB pages.
            const size_t mapped = (rounded + kPage - 1) / kPage * kPage, span = mapped + kHugePage;
            void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (raw == MAP_FAILED) throw std::bad_alloc();
            const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
            const uintptr_t start = (begin + kHugePage - 1) / kHugePage * kHugePage, end = start + mapped;
            if (start > begin) munmap(raw, start - begin);
            if (begin + span > end) munmap(reinterpret_cast<void*>(end), begin + span - end);
            data_ = reinterpret_cast<uint8_t*>(start);
            // advice only: failure (no THP) changes nothing
            (void)madvise(data_, mapped, pages == Pages::kHuge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
            mapped_ = mapped;
            return;
        }
        data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
        if (!data_) throw std::bad_alloc();
        std::memset(data_, 0, rounded);
    }
    // Grow (never shrink) without keeping contents; used for scratch space reused across steps.
    void ensure(size_t bytes) {
        if (bytes > size_) allocate(bytes);
    }

    uint8_t* data() { return data_; }
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    template <typename T>
    T* as() {
        return reinterpret_cast<T*>(data_);
    }
    template <typename T>
    const T* as() const {
        return reinterpret_cast<const T*>(data_);
    }

   private:
    static constexpr size_t kMapThreshold = size_t{4} << 20;
    static constexpr size_t kPage = 4096, kHugePage = size_t{2} << 20;
    void release() {
        if (mapped_) munmap(data_, mapped_);
        else std::free(data_);
        data_ = nullptr;
        mapped_ = 0;
    }
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;  // bytes of the anonymous mapping, 0 when heap-allocated
};

}  // namespace deepinfer
