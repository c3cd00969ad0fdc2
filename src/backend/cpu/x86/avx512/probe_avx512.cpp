// AVX-512 machine probes for bench-ops: a streaming read (the bandwidth every GEMV is measured against)
// and dependency-free FMA / bf16-dot loops (the peaks the GEMMs are measured against).
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {

namespace {
template <bool kAhead>
uint64_t read_lines(const uint8_t* p, size_t bytes) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 256 <= bytes; i += 256) {
        if constexpr (kAhead) {
#pragma GCC unroll 4
            for (int line = 0; line < 4; ++line)
                _mm_prefetch(reinterpret_cast<const char*>(p + i + kProbeAheadBytes + 64 * line), _MM_HINT_T1);
        }
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
    }
    // the lanes added as unsigned words: the sum wraps (_mm512_reduce_add_epi64 adds signed scalars in C, which
    // UBSan reports as overflow)
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    uint64_t sum = 0;
    for (uint64_t lane : lanes) sum += lane;
    return sum;
}
}  // namespace

// With `ahead`, each 64-byte line is also requested kProbeAheadBytes ahead into L2, as the decode kernels request
// their weights: on a Zen 5 VM the plain loop read 44.8-46.4 GB/s over 2 GiB with 2 threads, with the prefetch
// 8-64 KB ahead 48-51 GB/s (4 alternating runs); on a Zen 3 VM the other way round (AVX2, 12 alternating runs,
// medians: plain 29.6 GB/s, 16 KB ahead 24.4, 2-64 KB ahead 23.8-26.4). measure_read_gbps takes the faster of the
// two passes: a probe below what the kernels can reach would overstate their fraction of it. (Prefetches past the
// end of the buffer do not fault.)
uint64_t read_stream(const uint8_t* p, size_t bytes, bool ahead) {
    return ahead ? read_lines<true>(p, bytes) : read_lines<false>(p, bytes);
}

// 12 independent accumulators hide the latency; the empty asm keeps the loop from being folded.
float fma_loop(int64_t iters) {
    __m512 acc[12];
    for (auto& a : acc) a = _mm512_setzero_ps();
    __m512 x = _mm512_set1_ps(1.0f);
    const __m512 y = _mm512_set1_ps(1e-7f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(x, y, acc[j]);
        __asm__ volatile("" : "+" DEEPINFER_ZMM(x));
    }
    __m512 s = acc[0];
#pragma GCC unroll 16
    for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
    return _mm512_reduce_add_ps(s);
}

float dot_loop(int64_t iters) {
    __m512 acc[12];
    for (auto& a : acc) a = _mm512_setzero_ps();
    __m512i x = _mm512_set1_epi32(0x3f803f80);
    const __m512i y = _mm512_set1_epi32(0x33d633d6);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)x, (__m512bh)y);
        __asm__ volatile("" : "+" DEEPINFER_ZMM(x));
    }
    __m512 s = acc[0];
#pragma GCC unroll 16
    for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
    return _mm512_reduce_add_ps(s);
}

}  // namespace deepinfer::backend::cpu::avx512
