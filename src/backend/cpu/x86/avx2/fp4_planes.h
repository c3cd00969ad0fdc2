// What the AVX2 MXFP4 kernels on two int8 planes share (gemv_fp4_int_avx2.cpp for one activation row,
// gemm_fp4_few_rows_avx2.cpp for 2-4): the piece decode to biased bytes, a plane's products, the blocks those kernels
// hand to a third plane or to the fp32 chain, and the layout of their rows. The argument for why their integer
// sums are the fp32 kernel's bits: gemv_fp4_int_avx2.cpp. AVX2 translation units only.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/fp4_chunk.h"

namespace deepinfer::backend::cpu::avx2 {

// The rows of a GEMM of 2-4 activation rows, and the one row of the plain form's GEMV (fp4_row_bytes): a row of
// Fp4RowLayout (isa_ops.h), then its plane dwords broadcast, [kb][chunk c][lo0, lo1, hi0, hi1][8 dwords], so that
// vpmaddubsw takes them as memory operands (a broadcast per plane dword and row costs a vector op, and in registers
// they crowd out the sums; gemm_fp4_few_rows_avx2.cpp, chunk_pair_sums).
inline constexpr int64_t fp4_broadcast_offset(int64_t kb_count) { return fp4_row_layout(kb_count).bytes; }
inline constexpr int64_t fp4_rows_bytes(int64_t kb_count) { return fp4_broadcast_offset(kb_count) + 512 * kb_count; }

// A block's plane dwords (Fp4RowLayout: lo [8 dwords], hi [8 dwords]) each 8 times, [chunk c][lo0, lo1, hi0, hi1].
inline void broadcast_block_planes(const int32_t* planes, __m256i* out) {
    for (int c = 0; c < 4; ++c) {
        _mm256_store_si256(out + 4 * c, _mm256_set1_epi32(planes[2 * c]));
        _mm256_store_si256(out + 4 * c + 1, _mm256_set1_epi32(planes[2 * c + 1]));
        _mm256_store_si256(out + 4 * c + 2, _mm256_set1_epi32(planes[8 + 2 * c]));
        _mm256_store_si256(out + 4 * c + 3, _mm256_set1_epi32(planes[9 + 2 * c]));
    }
}

// A 32-byte piece of codes as unsigned bytes 2 w + 12 (tables::kE2M1Biased): in dword r, row r's weights of
// columns {0,4,1,5} (w0, the low nibbles) and {2,6,3,7} (w1, the high ones).
struct PieceWeights {
    __m256i w0, w1;
};
__attribute__((always_inline)) inline PieceWeights piece_weights(const uint8_t* q, __m256i lut, __m256i nib) {
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    return {_mm256_shuffle_epi8(lut, _mm256_and_si256(d, nib)),
            _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(d, 4), nib))};
}
// One plane's products of a piece in int16 lanes, the plane's bytes of the two column sets broadcast in p0 / p1:
// |each vpmaddubsw lane| <= 2 * 24 * 128, two fit.
__attribute__((always_inline)) inline __m256i plane_sums(const PieceWeights& w, __m256i p0, __m256i p1) {
    return _mm256_add_epi16(_mm256_maddubs_epi16(w.w0, p0), _mm256_maddubs_epi16(w.w1, p1));
}

// The plain form's products of one piece position in two chunks (their weights a and b, their plane dwords broadcast
// at planes[0..3] and planes[4..7]: lo0, lo1, hi0, hi1), lo plane + 256 x hi plane, added to the int32 sum. The two
// chunks' plane sums are added in int16 before one vpmaddwd each widens them: four vpmaddubsw lanes of at most
// 2 * 24 * 128 = 6144 stay below 2^15 (GemmFp4.PlaneSumsAtTheirBound), and a piece takes 5 integer multiplies, not
// 6. Why: Zen 1 runs them on one pipe at two cycles a ymm, the bound of these loops there (forty-eighth session,
// docs/PERFORMANCE.md); the planes come from memory because 8 broadcasts held in registers spilled the sums.
__attribute__((always_inline)) inline __m256i chunk_pair_sums(const PieceWeights& a, const PieceWeights& b,
                                                             const __m256i* planes, __m256i sum) {
    const __m256i s_lo = _mm256_add_epi16(plane_sums(a, planes[0], planes[1]), plane_sums(b, planes[4], planes[5]));
    const __m256i s_hi = _mm256_add_epi16(plane_sums(a, planes[2], planes[3]), plane_sums(b, planes[6], planes[7]));
    return _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_madd_epi16(s_lo, _mm256_set1_epi16(1)),
                                                  _mm256_madd_epi16(s_hi, _mm256_set1_epi16(256))));
}

// A block the integer form does not cover, as the fp32 kernel computes it for one row (gemm_quant_avx2.cpp
// stream_rows<1, G>): FMAs in column order, its lines requested ahead as the caller's loop requests its own
// (request_ahead). Out of line: inlined, its constants held registers through the block loop and the integer loop's
// sums went to the stack.
template <int G>
__attribute__((noinline)) void chain_block(const float* a, const uint8_t* block, __m256 (&p)[G][2]) {
    const Fp4Chunk chunk;
#pragma GCC unroll 1
    for (int g = 0; g < G; ++g) {
        __m256 q0 = _mm256_setzero_ps(), q1 = q0;
#pragma GCC unroll 1
        for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
            const uint8_t* piece = block + (c * G + g) * kPackedChunkBytes;
            request_ahead(piece);
            chunk.decode(piece, [&](int j, __m256 col0, __m256 col1) {
                const __m256 x = _mm256_broadcast_ss(a + c * Fp4Chunk::kCols + j);
                q0 = _mm256_fmadd_ps(col0, x, q0);
                q1 = _mm256_fmadd_ps(col1, x, q1);
            });
        }
        p[g][0] = q0;
        p[g][1] = q1;
    }
}

// One row's block on kPlanes int8 planes, as the plain form's loop takes it (gemv_fp4_int_avx2.cpp): a piece position
// through the block's chunks two at a time (chunk_pair_sums). kPlanes = 3: a block too wide for two planes whose
// products no fp32 partial sum can round (kFp4SumsExact: 12 sum |v| < 2^24), v = 65536 top + 256 hi + lo
// (Fp4RowLayout::top), the top plane's products of two chunks added in int16 as well (|top| <= 4): 7.5 integer
// multiplies a piece, where each chunk on its own took 9. Its fp32 chain is then exact too, so the integer sum times
// the unit is the chain's partial, as for two planes. Why: the SwiGLU rows of the expert w2 (k = 2304) have 16% of
// their blocks too wide for two planes, 0.4% not exact at all (w1 / w3: 1.7% and 0.3%; counted in bench-decode on
// the released dimensions), and the fp32 chain took ~1.9x the integer loop's time per block. kPlanes = 2: a
// two-plane block of one row where the GEMM of 2 rows (gemm_fp4_few_rows_avx2.cpp) cannot share its decode.
// The plane dwords come broadcast: `broadcast`, the block's [chunk][lo0, lo1, hi0, hi1] of the rows that have them
// (fp4_broadcast_offset), else made here from `planes`; the top plane's always here. Its lines are requested ahead
// as the caller's loop requests its own (request_ahead). Out of line: it keeps the calling loop's registers.
template <int G, int kPlanes>
__attribute__((noinline)) void planes_block(const int32_t* planes, const __m256i* broadcast, const int32_t* top,
                                            int32_t base, float unit, const uint8_t* block, __m256 (&p)[G][2]) {
    static_assert(kPlanes == 2 || kPlanes == 3);
    constexpr int64_t kPieceStride = G * kPackedChunkBytes;
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Biased.v)));
    const __m256i nib = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    alignas(32) __m256i made[16], tops[8];  // [chunk][lo0, lo1, hi0, hi1]; [chunk][top0, top1]
    if (!broadcast) {
        broadcast_block_planes(planes, made);
        broadcast = made;
    }
    if constexpr (kPlanes == 3)
        for (int c = 0; c < 2 * Fp4Chunk::kChunks; ++c) tops[c] = _mm256_set1_epi32(top[c]);
#pragma GCC unroll 8
    // the block's prefetches, as chain_block issues its own: the GEMV's loop issues them for two-plane blocks only
    // (the GEMM of 2 rows for every block, where these are repeats, 8 an unshared block at most)
    for (int64_t b = 0; b < G * Fp4Chunk::kBlockBytes; b += 64)
        request_ahead(block + b);
    // the piece positions interleaved, as in the GEMV's loop (one at a time its multiplies' latency shows: w2 on
    // SwiGLU rows, Zen 1, the scratch harness of docs/PERFORMANCE.md "Fiftieth session", 0.98-0.99x the time)
#pragma GCC unroll 4
    for (int i = 0; i < 2 * G; ++i) {
        const uint8_t* q = block + (i / 2) * kPackedChunkBytes + (i % 2) * 32;  // chunk 0's piece
        __m256i sum = _mm256_set1_epi32(base);
#pragma GCC unroll 2
        for (int c = 0; c < Fp4Chunk::kChunks; c += 2) {
            const PieceWeights a = piece_weights(q + c * kPieceStride, lut, nib);
            const PieceWeights b = piece_weights(q + (c + 1) * kPieceStride, lut, nib);
            sum = chunk_pair_sums(a, b, broadcast + 4 * c, sum);
            if constexpr (kPlanes == 3) {
                const __m256i* t = tops + 2 * c;
                const __m256i s_top = _mm256_add_epi16(plane_sums(a, t[0], t[1]), plane_sums(b, t[2], t[3]));
                sum = _mm256_add_epi32(sum, _mm256_slli_epi32(_mm256_madd_epi16(s_top, ones), 16));
            }
        }
        p[i / 2][i % 2] = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(unit));
    }
}

}  // namespace deepinfer::backend::cpu::avx2
