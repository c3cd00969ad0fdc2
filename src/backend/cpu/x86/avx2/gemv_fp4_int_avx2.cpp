// AVX2 MXFP4 GEMV (one activation row) on integers, bit-identical to the fp32 kernel of gemm_quant_avx2.cpp.
//
// Why: the fp32 kernel turns every weight into an fp32 lane (a byte shuffle and a conversion per 8 weights)
// and spends one FMA per 8 weights; on AVX2 that decode, not memory, sets its speed (~9 GB/s per core in
// cache). Here 32 bytes of codes become 64 unsigned bytes 2 * e2m1 + 12 (0..24) with 2 byte shuffles, and
// meet the activation row as exact integers with vpmaddubsw: 2 instructions per 32 products and plane.
//
// Why the bits do not change (spec §4.3: each 32-column block product is exact, summed in fp32 in column
// order, then scaled by sa * sw): a block's e4m3 values are v_k * 2^(e - 10) with integers v_k (e the
// smallest exponent in the block), the weights (2 w_k) / 2 with 2 w_k in -12..12. When every v_k fits two
// int8 planes (v = 256 * hi + lo, -32896 <= v <= 32639), every partial sum of the block is an integer multiple
// of 2^(e - 11) below 12 * 32 * 32896 < 2^24 of them: fp32 holds each exactly, so the fp32 kernel's FMA chain
// never rounds and its partial is the integer sum here times 2^(e - 11) (times the 2^25 its decode carries).
// Other blocks (wider integers, a NaN code) run the fp32 kernel's own chain. Either way the partial enters the
// same scaling, so a row gives the same bits alone (here) as in a batch: row invariance,
// tests/ops/row_invariance_test.cpp.
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/avx2/fp4_chunk.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// (The row's layout: Fp4RowLayout in isa_ops.h.)

// One row against G groups of a pair (packing.h; G = 1 for a lone last group), the groups taking turns within
// each block as in the fp32 kernel (stream_rows), so the pair is read as one stream.
template <int G>
void gemv_groups(const QuantGemmTask& t, int64_t g0) {
    const int64_t kb_count = t.k / 32;
    const Fp4RowLayout layout = fp4_row_layout(kb_count);
    const uint8_t* row = t.fp4_row;
    const auto* base = reinterpret_cast<const int32_t*>(row + layout.base);
    const auto* unit = reinterpret_cast<const float*>(row + layout.unit);
    const uint8_t* exact = row + layout.exact;
    const float* a = static_cast<const float*>(t.acts);
    const uint8_t* codes =
        t.codes + packed_group(g0, t.groups, kb_count, Fp4Chunk::kBlockBytes, kPackedChunkBytes).offset;
    constexpr int64_t kPieceStride = G * kPackedChunkBytes, kBlockStride = G * Fp4Chunk::kBlockBytes;
    float* acc = t.scratch;  // [G][16]
    for (int e = 0; e < 16 * G; e += 8) _mm256_store_ps(acc + e, _mm256_setzero_ps());
    const Fp4Chunk chunk;
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Biased.v)));
    const __m256i nib = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256 f = _mm256_set1_ps(Fp4Chunk::kValueScale);
    for (int64_t kb = 0; kb < kb_count; ++kb) {
#pragma GCC unroll 1
        for (int g = 0; g < G; ++g) {
            const uint8_t* block = codes + kb * kBlockStride + g * kPackedChunkBytes;
            __m256 p[2];
            if (exact[kb] & kFp4PlanesExact) {
                const auto* planes = reinterpret_cast<const int32_t*>(row + 64 * kb);
                __m256i lo[2], hi[2];  // rows 0-7, 8-15: the two planes' int32 sums
#pragma GCC unroll 2
                for (int h = 0; h < 2; ++h) {
                    lo[h] = _mm256_set1_epi32(base[kb]);
                    hi[h] = _mm256_setzero_si256();
                    // int16 sums over two chunks at a time: |each vpmaddubsw lane| <= 2 * 24 * 128, four fit
#pragma GCC unroll 2
                    for (int c0 = 0; c0 < Fp4Chunk::kChunks; c0 += 2) {
                        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
#pragma GCC unroll 2
                        for (int c = c0; c < c0 + 2; ++c) {
                            const uint8_t* piece = block + c * kPieceStride;
                            if (h == 0)
                                _mm_prefetch(reinterpret_cast<const char*>(piece + kPrefetchBytes), _MM_HINT_T0);
                            const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(piece + 32 * h));
                            // dword r: row r's weights of columns {0,4,1,5} (low nibbles) and {2,6,3,7} (high)
                            const __m256i w0 = _mm256_shuffle_epi8(lut, _mm256_and_si256(d, nib));
                            const __m256i w1 =
                                _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(d, 4), nib));
                            auto dot = [&](const int32_t* x) {  // the chunk's 8 columns against 8 plane bytes
                                return _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(x[0])),
                                                        _mm256_maddubs_epi16(w1, _mm256_set1_epi32(x[1])));
                            };
                            s0 = _mm256_add_epi16(s0, dot(planes + 2 * c));
                            s1 = _mm256_add_epi16(s1, dot(planes + 8 + 2 * c));
                        }
                        lo[h] = _mm256_add_epi32(lo[h], _mm256_madd_epi16(s0, ones));
                        hi[h] = _mm256_add_epi32(hi[h], _mm256_madd_epi16(s1, ones));
                    }
                }
                const __m256 u = _mm256_set1_ps(unit[kb]);
#pragma GCC unroll 2
                for (int h = 0; h < 2; ++h)
                    p[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(lo[h], _mm256_slli_epi32(hi[h], 8))), u);
            } else {
                // The fp32 kernel's block for one row (gemm_quant_avx2.cpp stream_rows<1, G>): FMAs in column order.
                p[0] = p[1] = _mm256_setzero_ps();
#pragma GCC unroll 1
                for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
                    _mm_prefetch(reinterpret_cast<const char*>(block + c * kPieceStride + kPrefetchBytes), _MM_HINT_T0);
                    chunk.decode(block + c * kPieceStride, [&](int j, __m256 col0, __m256 col1) {
                        const __m256 x = _mm256_broadcast_ss(a + kb * 32 + c * Fp4Chunk::kCols + j);
                        p[0] = _mm256_fmadd_ps(col0, x, p[0]);
                        p[1] = _mm256_fmadd_ps(col1, x, p[1]);
                    });
                }
            }
            __m256 sw0, sw1;
            fp4_scales(t, g0 + g, kb, sw0, sw1);
            scale_into(acc + 16 * g, p[0], p[1], _mm256_mul_ps(sw0, f), _mm256_mul_ps(sw1, f), t.act_scales[kb]);
        }
    }
    for (int g = 0; g < G; ++g) store_rows(t, g0 + g, 0, acc + 16 * g);
}

}  // namespace

// Pair by pair, a lone last group on its own.
void gemv_fp4_int(const QuantGemmTask& t) {
    for (int64_t g = 0; g < t.groups; g += 2) {
        if (g + 2 <= t.groups) gemv_groups<2>(t, g);
        else gemv_groups<1>(t, g);
    }
}

}  // namespace deepinfer::backend::cpu::avx2
