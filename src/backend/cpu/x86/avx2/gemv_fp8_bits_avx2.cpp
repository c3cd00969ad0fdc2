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
//     blocks: adding each into the sums at once (load, FMA, store per block) held the replica at 9.2;
//   - two pairs at a time (pairs<2>): streamed, this kernel took ~12 TSC cycles per 64 B on one core against
//     ~8 with the weight in L2, and a read-only pass over the same bytes ~11 as one sequential stream and ~9-10
//     as two interleaved ones.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/fp4_chunk.h"
#include "backend/cpu/x86/avx2/fp8_bits_chunk.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// The scaling of stream_rows over the block partials part[kb][G][16] of the G groups from g0 (fp4_chunk.h).
template <int G>
void scale_and_store(const QuantGemmTask& t, int64_t g0, const float* part, float* acc) {
    const uint8_t* scales = pair_pieces(t.scales, t, g0, 1);  // [kb][G]
    scale_partials_and_store<G>(t, g0, part, acc, _mm256_set1_ps(Fp8BitsChunk::kValueScale),
                                [&](int g, int64_t kb, __m256& sw0, __m256& sw1) {
                                    sw0 = sw1 = _mm256_set1_ps(e8m0_to_float(scales[kb * G + g]));
                                });
}

// One row against a lone last group g0 (packing.h: a group without its pair), by the pairs' decode. Same chains, same
// bits as pairs.
template <class Decode>
void lone_group(const QuantGemmTask& t, int64_t g0) {
    const int64_t kb_count = t.k / 32;
    const float* x = static_cast<const float*>(t.bits_acts);  // [k][8]
    const uint8_t* codes =
        t.codes + packed_group(g0, t.groups, kb_count, Fp8BitsChunk::kBlockBytes, kPackedChunkBytes).offset;
    float* acc = t.scratch;            // [16]
    float* part = t.scratch + 16 * 2;  // [kb][16]: the block partials (k / 2 floats; the scratch holds 24 k)
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        const uint8_t* block = codes + kb * Fp8BitsChunk::kBlockBytes;
        __m256 p0 = _mm256_setzero_ps(), p1 = p0;  // rows 0-7, 8-15
#pragma GCC unroll 1
        for (int c = 0; c < Fp8BitsChunk::kChunks; ++c) {
            const uint8_t* piece = block + c * kPackedChunkBytes;
            request_ahead(piece);
            const float* xc = x + 8 * (kb * 32 + c * Fp8BitsChunk::kCols);
            decode_columns<Decode>(piece, [&](int j, __m256 lo, __m256 hi) __attribute__((always_inline)) {
                const __m256 xj = _mm256_load_ps(xc + 8 * j);
                p0 = _mm256_fmadd_ps(lo, xj, p0);
                p1 = _mm256_fmadd_ps(hi, xj, p1);
            });
        }
        _mm256_store_ps(part + kb * 16, p0);
        _mm256_store_ps(part + kb * 16 + 8, p1);
    }
    scale_and_store<1>(t, g0, part, acc);
}

// One row against P pairs (groups g0 .. g0 + 2P - 1; P = 1 or 2), chunk by chunk: a chunk (both groups) of the
// first pair, then of the second. Each pair is a sequential stream, and two streams a core draw more from memory
// on Zen 3 than one (a read-only pass over a weight as two interleaved halves took 0.80-0.87 of the time of one
// sequential pass, in process, alternating). Each column is made just before its FMA (the split of its half
// chunk kept), so the accumulators stay in registers. Same chains, same bits as lone_group. (A lone pair ran
// gemv_groups<2> before, which decodes a chunk's 16 columns first and kept 2 of its 4 sums on the stack: a store
// and a reload per chunk.)
// Decode: Fp8BitsChunk, or Fp8BitsHalfRate where ymm ops issue as two halves (the same columns, bit for bit).
template <int P, class Decode>
void pairs(const QuantGemmTask& t, int64_t g0) {
    const int64_t kb_count = t.k / 32;
    const float* x = static_cast<const float*>(t.bits_acts);  // [k][8]
    float* acc = t.scratch;                   // [2][16]
    float* part_a = t.scratch + 16 * 2;       // [kb][2][16]: the first pair's block partials
    float* part_b = part_a + 32 * kb_count;   // [kb][2][16]: the second's (2 k floats; the scratch holds 24 k)
    const auto codes = [&](int64_t g) {
        return t.codes + packed_group(g, t.groups, kb_count, Fp8BitsChunk::kBlockBytes, kPackedChunkBytes).offset;
    };
    const uint8_t* ca = codes(g0);
    const uint8_t* cb = P == 2 ? codes(g0 + 2) : ca;
    constexpr int64_t kPieceStride = 2 * kPackedChunkBytes, kBlockStride = 2 * Fp8BitsChunk::kBlockBytes;
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        // [pair][group][rows 0-7, 8-15], named: arrays indexed by unrolled loops can stay on the stack
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
        __m256 b00 = a00, b01 = a00, b10 = a00, b11 = a00;
#pragma GCC unroll 1
        for (int c = 0; c < Fp8BitsChunk::kChunks; ++c) {
            const float* xc = x + 8 * (kb * 32 + c * Fp8BitsChunk::kCols);
            const auto half = [&](const uint8_t* q, __m256& sum) __attribute__((always_inline)) {
                const typename Decode::Split s = Decode::split(q);
#pragma GCC unroll 4
                for (int j = 0; j < 4; ++j)
                    sum = _mm256_fmadd_ps(Decode::column(s, j), _mm256_load_ps(xc + 8 * j), sum);
            };
            const uint8_t* pa = ca + kb * kBlockStride + c * kPieceStride;
            const uint8_t* pb = cb + kb * kBlockStride + c * kPieceStride;
            request_ahead(pa);
            request_ahead(pa + kPackedChunkBytes);
            if constexpr (P == 2) {
                request_ahead(pb);
                request_ahead(pb + kPackedChunkBytes);
            }
            half(pa, a00);
            half(pa + 32, a01);
            half(pa + kPackedChunkBytes, a10);
            half(pa + kPackedChunkBytes + 32, a11);
            if constexpr (P == 2) {
                half(pb, b00);
                half(pb + 32, b01);
                half(pb + kPackedChunkBytes, b10);
                half(pb + kPackedChunkBytes + 32, b11);
            }
        }
        float* qa = part_a + kb * 32;
        _mm256_store_ps(qa, a00);
        _mm256_store_ps(qa + 8, a01);
        _mm256_store_ps(qa + 16, a10);
        _mm256_store_ps(qa + 24, a11);
        if constexpr (P == 2) {
            float* qb = part_b + kb * 32;
            _mm256_store_ps(qb, b00);
            _mm256_store_ps(qb + 8, b01);
            _mm256_store_ps(qb + 16, b10);
            _mm256_store_ps(qb + 24, b11);
        }
    }
    scale_and_store<2>(t, g0, part_a, acc);
    if constexpr (P == 2) scale_and_store<2>(t, g0 + 2, part_b, acc);
}

// Two pairs at a time, then a last pair, then a lone last group.
template <class Decode>
void gemv_with(const QuantGemmTask& t) {
    int64_t g = 0;
    for (; g + 4 <= t.groups; g += 4) pairs<2, Decode>(t, g);
    if (g + 2 <= t.groups) {
        pairs<1, Decode>(t, g);
        g += 2;
    }
    if (g < t.groups) lone_group<Decode>(t, g);
}

}  // namespace

// Each line requested 6 KB ahead into L2 (fp4_chunk.h request_ahead) -- Zen 4 in the EVEX VNNI form (`bench-ops
// --isa avx2 --rows 1 --only fp8 --per-call 30`, against 3 KB into L1 call by call, three rounds): 3 KB into L1 took
// 1.04-1.16x the time on the large weights with two threads (wq_b 1.09-1.12, wo_b 1.04-1.11, Engram's wkv
// 1.07-1.14), 1.00-1.28x with one; 1.5 KB into L1 measured as 3 KB, none 1.1-1.3x. In the plain form 1.02-1.14x with
// two threads, 0.98-1.03x with one (sixtieth session); on Zen 1 every plan measured the same (compute-bound).
void gemv_fp8_bits(const QuantGemmTask& t) {
    if (ymm_half_rate()) {
        gemv_with<Fp8BitsHalfRate>(t);  // (Zen 1)
        return;
    }
    gemv_with<Fp8BitsChunk>(t);
}

}  // namespace deepinfer::backend::cpu::avx2
