// Owned, 64-byte aligned, zero-initialised byte buffers: the storage under tensors, caches and scratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace deepinfer {

class AlignedBuffer {
   public:
    static constexpr size_t kAlignment = 64;

    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t bytes) { allocate(bytes); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    AlignedBuffer(AlignedBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
        if (this != &other) {
            std::free(data_);
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }
    ~AlignedBuffer() { std::free(data_); }

    // Reallocate to `bytes` (contents are not kept), zero-filled.
    void allocate(size_t bytes) {
        std::free(data_);
        data_ = nullptr;
        size_ = bytes;
        if (bytes == 0) return;
        size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
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
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace deepinfer
