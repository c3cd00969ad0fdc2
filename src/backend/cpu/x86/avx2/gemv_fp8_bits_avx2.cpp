// AVX2 fp8 GEMV (one activation row) with the bit-placing decode (fp8_bits_chunk.h), bit-identical to the
// several-row kernel of gemm_quant_avx2.cpp (stream_rows): the same decode, the same FMA chains in column order,
// the same block scaling.
//
// Why a kernel of its own: on Zen 3 the one-row stream ran at ~12 GB/s per core in cache, below the ~15 per core
// the memory gives when both cores read, and the vector pipes, not memory, set that (a scratch replica of the loop:
// 12.0 TSC cycles per 64-byte chunk; without the FMAs still 10). Here (replica 7.9; this kernel called directly on
// an L2-resident weight 8.2-10.3 against 11.9-12.2 before):
//   - the 16-bit decode of fp8_bits_chunk.h (10 shuffle and shift ops per chunk instead of 16);
//   - both groups of a pair are decoded chunk by chunk side by side, so each activation meets 4 FMAs
//     (stream_rows takes the groups in turn within a block: 2);
//   - the activation row comes broadcast already (fp8_bits_acts for one row: each value 8 times, [k][8]), so
//     taking a value is a plain load instead of a broadcast, which on Zen 3 occupies a vector pipe;
//   - the block partials are stored as they are and scaled into the sums in a second pass over the pair's
//     blocks: adding each into the sums at once (load, FMA, store per block) held the replica at 9.2.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/fp4_chunk.h"
#include "backend/cpu/x86/avx2/fp8_bits_chunk.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// One row against the G groups of a pair (packing.h; G = 1 for a lone last group).
template <int G>
void gemv_groups(const QuantGemmTask& t, int64_t g0) {
    const int64_t kb_count = t.k / 32;
    const float* x = static_cast<const float*>(t.bits_acts);  // [k][8]
    const uint8_t* codes =
        t.codes + packed_group(g0, t.groups, kb_count, Fp8BitsChunk::kBlockBytes, kPackedChunkBytes).offset;
    constexpr int64_t kPieceStride = G * kPackedChunkBytes, kBlockStride = G * Fp8BitsChunk::kBlockBytes;
    float* acc = t.scratch;            // [G][16]
    float* part = t.scratch + 16 * 2;  // [kb][G][16]: the block partials (k floats; the scratch holds 24 k)
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        const uint8_t* block = codes + kb * kBlockStride;
        __m256 p[G][2];  // [group][rows 0-7, 8-15]
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) p[g][0] = p[g][1] = _mm256_setzero_ps();
#pragma GCC unroll 1
        for (int c = 0; c < Fp8BitsChunk::kChunks; ++c) {
            __m256 lo[G][4], hi[G][4];  // columns of rows 0-7, 8-15
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g) {
                const uint8_t* piece = block + c * kPieceStride + g * kPackedChunkBytes;
                _mm_prefetch(reinterpret_cast<const char*>(piece + kPrefetchBytes), _MM_HINT_T0);
                Fp8BitsChunk::decode_half(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(piece)), lo[g]);
                Fp8BitsChunk::decode_half(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(piece + 32)), hi[g]);
            }
            const float* xc = x + 8 * (kb * 32 + c * Fp8BitsChunk::kCols);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const __m256 xj = _mm256_load_ps(xc + 8 * j);
#pragma GCC unroll 2
                for (int g = 0; g < G; ++g) {
                    p[g][0] = _mm256_fmadd_ps(lo[g][j], xj, p[g][0]);
                    p[g][1] = _mm256_fmadd_ps(hi[g][j], xj, p[g][1]);
                }
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            _mm256_store_ps(part + (kb * G + g) * 16, p[g][0]);
            _mm256_store_ps(part + (kb * G + g) * 16 + 8, p[g][1]);
        }
    }
    // the scaling of stream_rows, block by block in the same order
    for (int e = 0; e < 16 * G; e += 8) _mm256_store_ps(acc + e, _mm256_setzero_ps());
    const __m256 f = _mm256_set1_ps(Fp8BitsChunk::kValueScale);
    for (int64_t kb = 0; kb < kb_count; ++kb)
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            const uint8_t code = t.scales[packed_scale_offset(g0 + g, t.groups, kb, kb_count, 1)];
            const __m256 sw = _mm256_mul_ps(_mm256_set1_ps(e8m0_to_float(code)), f);
            const float* q = part + (kb * G + g) * 16;
            scale_into(acc + 16 * g, _mm256_load_ps(q), _mm256_load_ps(q + 8), sw, sw, t.act_scales[kb]);
        }
    for (int g = 0; g < G; ++g) store_rows(t, g0 + g, 0, acc + 16 * g);
}

}  // namespace

void gemv_fp8_bits(const QuantGemmTask& t) {
    for (int64_t g = 0; g < t.groups; g += 2) {
        if (g + 2 <= t.groups) gemv_groups<2>(t, g);
        else gemv_groups<1>(t, g);
    }
}

}  // namespace deepinfer::backend::cpu::avx2
