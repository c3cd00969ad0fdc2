// AVX2 machine probes for bench-ops (see probe_avx512.cpp); there is no bf16 dot product, so dot_loop
// is the fp32 FMA loop the AVX2 kernels use instead.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {

namespace {
template <bool kAhead>
uint64_t read_lines(const uint8_t* p, size_t bytes) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= bytes; i += 128) {
        if constexpr (kAhead) {
            _mm_prefetch(reinterpret_cast<const char*>(p + i + kProbeAheadBytes), _MM_HINT_T1);
            _mm_prefetch(reinterpret_cast<const char*>(p + i + kProbeAheadBytes + 64), _MM_HINT_T1);
        }
        a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
    }
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
}  // namespace

// With `ahead`, each line is also requested kProbeAheadBytes ahead into L2 (see probe_avx512.cpp).
uint64_t read_stream(const uint8_t* p, size_t bytes, bool ahead) {
    return ahead ? read_lines<true>(p, bytes) : read_lines<false>(p, bytes);
}

float fma_loop(int64_t iters) {
    __m256 acc[12];
    for (auto& a : acc) a = _mm256_setzero_ps();
    __m256 x = _mm256_set1_ps(1.0f);
    const __m256 y = _mm256_set1_ps(1e-7f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(x, y, acc[j]);
        __asm__ volatile("" : "+v"(x));
    }
    __m256 s = acc[0];
#pragma GCC unroll 16
    for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, s);
    float total = 0;
    for (float v : lanes) total += v;
    return total;
}

float dot_loop(int64_t iters) { return fma_loop(iters); }

}  // namespace deepinfer::backend::cpu::avx2
