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
// Wider blocks whose sums stay exact (kFp4SumsExact) take a third plane (fp4_planes.h planes_block); the rest (a NaN
// code, sums that could round) run the fp32 kernel's own chain. Either way the partial enters the
// same scaling, so a row gives the same bits alone (here) as in a batch: row invariance,
// tests/ops/row_invariance_test.cpp.
//
// The plain form takes a piece position (8 rows) through the block's 4 chunks, two chunks' plane sums added in int16
// before they are widened (fp4_planes.h chunk_pair_sums): 9 instructions per piece for the products (4 vpmaddubsw,
// 3 vpaddw, 1 vpmaddwd, 1 vpaddd), the activation planes read broadcast from the row. With AVX-VNNI (fp4_chunk.h
// AvxVnni), each plane's products of a piece go into an int32 sum of that plane with two vpdpbusd, and the high
// plane's sum is shifted in once per block: 4 instructions per piece, the same integer sums.
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/avx2/fp4_planes.h"
#include "backend/cpu/x86/avx2/vnni_dot.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// One row against G groups of a pair (packing.h; G = 1 for a lone last group), the groups taking turns within
// each block as in the fp32 kernel (stream_rows), so the pair is read as one stream. Form: PlainAvx2 or AvxVnni.
template <int G, class Form>
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
    float* acc = t.scratch;            // [G][16]
    float* part = t.scratch + 16 * 2;  // [kb][G][16]: the block partials
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Biased.v)));
    const __m256i nib = _mm256_set1_epi8(0x0f);
    const __m256 f = _mm256_set1_ps(Fp4Chunk::kValueScale);
    // Software prefetch along the pair's stream, 6 KB ahead into L2 (request_ahead, fp4_chunk.h), as the AVX-512
    // GEMV's away from Zen 4 -- on Zen 5, streamed MoE of 6 experts (`bench-ops --isa avx2 --no-hugepages --rows 1 4
    // --only moe`, alternating) at 83 GB/s 766-791 / 3105-3168 us against 853-869 / 3464-3469 for 3 KB into L1, at
    // ~50 GB/s 905-942 / 3654-3752 against 992-1467 / 3686-3884. The blocks out of line (planes_block, chain_block)
    // request their lines the same way: with 3 KB into L1 there, the 6 KB stream had a hole for each of them, and w2
    // on SwiGLU rows (16% three-plane blocks) took 1.52-1.67x the time at one row (Zen 4, `bench-ops --isa avx2 --rows
    // 1 --only fp4 --per-call 40`, EVEX VNNI form, the two alternating call by call; w1 1.02-1.08x, the grouped
    // experts 1.05-1.11x).
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        const uint8_t* block = codes + kb * kBlockStride;
        __m256 p[G][2];  // [group][rows 0-7, 8-15]: the block partials
        if (exact[kb] & kFp4PlanesExact) {
            if constexpr (Form::kVnni) {
                const auto* planes = reinterpret_cast<const int32_t*>(row + 64 * kb);
                // int32 sums [group][half: rows 0-7, 8-15] of each plane, the high one shifted in at the end. Each
                // chunk's 4 plane dwords are broadcast once for all 2 G of its 32-byte pieces (on Zen 3, broadcast
                // per piece they cost a quarter of a scratch replica of the plain form's loop). The sums are named,
                // not an array: the unroll pragmas act after GCC's scalar replacement, and an array indexed by an
                // unrolled loop stayed on the stack.
                __m256i s00 = _mm256_set1_epi32(base[kb]), s01 = s00, s10 = s00, s11 = s00;
                __m256i h00 = _mm256_setzero_si256(), h01 = h00, h10 = h00, h11 = h00;
#pragma GCC unroll 1
                for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
                    // the chunk's 8 columns against 8 plane bytes: 4 columns {0,4,1,5} (low nibbles), 4 {2,6,3,7}
                    const __m256i lo0 = _mm256_set1_epi32(planes[2 * c]), lo1 = _mm256_set1_epi32(planes[2 * c + 1]);
                    const __m256i hi0 = _mm256_set1_epi32(planes[8 + 2 * c]);
                    const __m256i hi1 = _mm256_set1_epi32(planes[9 + 2 * c]);
                    const auto half = [&](const uint8_t* q, __m256i& sum, __m256i& high)
                                          __attribute__((always_inline)) {
                        const PieceWeights w = piece_weights(q, lut, nib);
                        sum = dpbusd<Form>(dpbusd<Form>(sum, w.w0, lo0), w.w1, lo1);
                        high = dpbusd<Form>(dpbusd<Form>(high, w.w0, hi0), w.w1, hi1);
                    };
                    const uint8_t* piece = block + c * kPieceStride;
                    request_ahead(piece);
                    half(piece, s00, h00);
                    half(piece + 32, s01, h01);
                    if constexpr (G == 2) {
                        const uint8_t* second = piece + kPackedChunkBytes;
                        request_ahead(second);
                        half(second, s10, h10);
                        half(second + 32, s11, h11);
                    }
                }
                // lo + 256 x hi, as the plain form's vpmaddwd by 256
                s00 = _mm256_add_epi32(s00, _mm256_slli_epi32(h00, 8));
                s01 = _mm256_add_epi32(s01, _mm256_slli_epi32(h01, 8));
                s10 = _mm256_add_epi32(s10, _mm256_slli_epi32(h10, 8));
                s11 = _mm256_add_epi32(s11, _mm256_slli_epi32(h11, 8));
                const __m256 u = _mm256_set1_ps(unit[kb]);
                p[0][0] = _mm256_mul_ps(_mm256_cvtepi32_ps(s00), u);
                p[0][1] = _mm256_mul_ps(_mm256_cvtepi32_ps(s01), u);
                if constexpr (G == 2) {
                    p[G - 1][0] = _mm256_mul_ps(_mm256_cvtepi32_ps(s10), u);
                    p[G - 1][1] = _mm256_mul_ps(_mm256_cvtepi32_ps(s11), u);
                }
            } else {
                // piece position i (group i / 2, rows 0-7 if i is even, else 8-15) through the 4 chunks, a pair at a
                // time; the plane dwords come broadcast in the row (fp4_row_bytes), [chunk][lo0, lo1, hi0, hi1]
                const auto* planes = reinterpret_cast<const __m256i*>(row + fp4_broadcast_offset(kb_count)) + kb * 16;
#pragma GCC unroll 8
                for (int64_t b = 0; b < kBlockStride; b += 64)
                    request_ahead(block + b);
                const __m256i start = _mm256_set1_epi32(base[kb]);
                __m256i sums[2 * G];
#pragma GCC unroll 4
                for (int i = 0; i < 2 * G; ++i) {
                    const uint8_t* q = block + (i / 2) * kPackedChunkBytes + (i % 2) * 32;  // chunk 0's piece
                    sums[i] = start;
#pragma GCC unroll 2
                    for (int c = 0; c < Fp4Chunk::kChunks; c += 2)
                        sums[i] = chunk_pair_sums(piece_weights(q + c * kPieceStride, lut, nib),
                                                  piece_weights(q + (c + 1) * kPieceStride, lut, nib), planes + 4 * c,
                                                  sums[i]);
                }
                const __m256 u = _mm256_set1_ps(unit[kb]);
#pragma GCC unroll 4
                for (int i = 0; i < 2 * G; ++i) p[i / 2][i % 2] = _mm256_mul_ps(_mm256_cvtepi32_ps(sums[i]), u);
            }
        } else if (exact[kb] & kFp4SumsExact) {
            const auto* top = reinterpret_cast<const int32_t*>(row + layout.top + 32 * kb);
            // the plain form's row has the planes broadcast, the VNNI form's not (fp4_row_bytes)
            const __m256i* broadcast = nullptr;
            if constexpr (!Form::kVnni)
                broadcast = reinterpret_cast<const __m256i*>(row + fp4_broadcast_offset(kb_count)) + kb * 16;
            planes_block<G, 3>(reinterpret_cast<const int32_t*>(row + 64 * kb), broadcast, top, base[kb],
                                      unit[kb], block, p);
        } else {
            chain_block<G>(a + kb * 32, block, p);
        }
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            _mm256_store_ps(part + (kb * G + g) * 16, p[g][0]);
            _mm256_store_ps(part + (kb * G + g) * 16 + 8, p[g][1]);
        }
    }
    const uint8_t* scales = pair_pieces(t.scales, t, g0, Fp4Chunk::kScaleBytes);
    scale_partials_and_store<G>(t, g0, part, acc, f, [&](int g, int64_t kb, __m256& sw0, __m256& sw1) {
        fp4_scales_at(t, scales + (kb * G + g) * Fp4Chunk::kScaleBytes, sw0, sw1);
    });
}

}  // namespace

namespace {

// Out of line: the form's code stays in functions named with it (tests/ops/avx2_isa_check.py).
template <class Form>
__attribute__((noinline)) void gemv_pairs(const QuantGemmTask& t) {
    for (int64_t g = 0; g < t.groups; g += 2) {
        if (g + 2 <= t.groups) gemv_groups<2, Form>(t, g);
        else gemv_groups<1, Form>(t, g);
    }
}

}  // namespace

// Pair by pair, a lone last group on its own.
void gemv_fp4_int(const QuantGemmTask& t) {
    with_form([&]<class Form>(Form) { gemv_pairs<Form>(t); });
}

}  // namespace deepinfer::backend::cpu::avx2
