// Software prefetch for the dense GEMMs' blocked path (x86/*/gemm_dense_*.cpp): while one L2 block of weight
// rows computes, the next block's rows are requested into L2, one 64-byte line every few column steps, so the
// block's first pass does not wait on memory.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace deepinfer::backend::cpu {
// Internal linkage: every ISA translation unit gets its own copy (isa_ops.h: the ISA TUs share no COMDAT symbol).
namespace {

struct BlockPrefetch {
    const uint8_t* next = nullptr;
    const uint8_t* end = nullptr;
    int64_t every = 0, countdown = 0;
    // Called once per column step of the current block.
    inline void step() {
        if (next >= end || --countdown > 0) return;
        countdown = every;
        _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T1);
        next += 64;
    }
    // `count` column steps at once: the lines they are due, issued together.
    inline void steps(int64_t count) {
        countdown -= count;
        while (countdown <= 0 && next < end) {
            _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T1);
            next += 64;
            countdown += every;
        }
    }
};

// The rows [j1, j2) (row_bytes each, from w) spread over `steps` column steps.
inline BlockPrefetch next_block(const void* w, int64_t row_bytes, int64_t j1, int64_t j2, int64_t steps) {
    BlockPrefetch pf;
    pf.next = static_cast<const uint8_t*>(w) + j1 * row_bytes;
    pf.end = static_cast<const uint8_t*>(w) + j2 * row_bytes;
    const int64_t lines = (j2 - j1) * row_bytes / 64;
    pf.every = pf.countdown = lines > 0 && steps > lines ? steps / lines : 1;
    return pf;
}

}  // namespace
}  // namespace deepinfer::backend::cpu
