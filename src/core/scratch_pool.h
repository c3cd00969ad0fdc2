// Storage for the large temporaries of a forward pass (a prefill chunk's activations: tens to hundreds of MB
// each), kept for reuse. Every layer and chunk asks for the same shapes again; fresh memory costs a page fault
// per 4 KB page on first touch, taken on the thread that runs the model while the thread pool waits: a
// 2048-token prefill of the released dims took ~500 000 faults (perf stat), ~1/3 of that thread's time
// outside the kernels. Blocks of kPooledBytes and more come from here: mappings handed back on release and
// reused for a later request of about their size (`deepinfer bench --input-lens 2048 4096` on the released
// dims: TTFT 6.3 -> 5.9 s and 12.5 -> 10.9 s).
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace deepinfer {

namespace scratch_pool {
// Requests of this size and more are pooled; smaller ones go to the heap.
constexpr size_t kPooledBytes = size_t{4} << 20;
// At most this many bytes are kept idle; beyond it the blocks released longest ago are unmapped.
constexpr size_t kMaxIdleBytes = size_t{2} << 30;

// A block of at least `bytes` (>= kPooledBytes), 64-byte aligned. Its contents are unspecified: a reused
// block holds what its last user left.
void* acquire(size_t bytes);
// Hand back a block from acquire() (nullptr: nothing).
void release(void* block) noexcept;

struct Stats {
    size_t idle_blocks = 0, idle_bytes = 0, in_use_blocks = 0;
    size_t mapped = 0, reused = 0;  // acquisitions served by a new mapping / by an idle block, since start
};
Stats stats();
// Unmap every idle block (tests; a server could call it after a burst of long prompts).
void trim();
}  // namespace scratch_pool

// std::allocator for small requests, the pool for large ones. Elements made without a value are left
// uninitialised (default-initialised), not zeroed: the forward's temporaries are written whole before they
// are read, and zeroing them first was a serial memset of ~0.5 GB per layer of a 2048-token prefill.
// Under AddressSanitizer every request goes to the heap, where ASan guards each allocation's bounds (the
// pool's blocks are plain mappings it cannot check), and new storage is filled with 0xff bytes -- NaN as
// floats and bf16, -1 as integers -- so a read of an element nobody wrote shows in the results.
template <class T>
struct ScratchAllocator {
    using value_type = T;
    ScratchAllocator() = default;
    template <class U>
    ScratchAllocator(const ScratchAllocator<U>&) noexcept {}
    static bool pooled(size_t n) {
#if defined(__SANITIZE_ADDRESS__)
        (void)n;
        return false;
#else
        return n * sizeof(T) >= scratch_pool::kPooledBytes;
#endif
    }
    T* allocate(size_t n) {
        T* p = pooled(n) ? static_cast<T*>(scratch_pool::acquire(n * sizeof(T))) : std::allocator<T>{}.allocate(n);
#if defined(__SANITIZE_ADDRESS__)
        std::memset(static_cast<void*>(p), 0xff, n * sizeof(T));
#endif
        return p;
    }
    void deallocate(T* p, size_t n) noexcept {
        if (!pooled(n)) std::allocator<T>{}.deallocate(p, n);
        else scratch_pool::release(p);
    }
    // default-initialisation: no zeroing (see above); with arguments, as std::allocator
    template <class U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
    template <class U>
    bool operator==(const ScratchAllocator<U>&) const noexcept {
        return true;
    }
};

// A vector for per-call temporaries that may be large. ScratchVector<float> v(n) holds n unset floats;
// ScratchVector<float> v(n, 0.0f) zeros.
template <class T>
using ScratchVector = std::vector<T, ScratchAllocator<T>>;

}  // namespace deepinfer
