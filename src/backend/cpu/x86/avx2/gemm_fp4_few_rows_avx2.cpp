// AVX2 MXFP4 GEMM of 2-4 act_quant rows on two int8 planes, bit-identical to the fp32 kernel of
// gemm_quant_avx2.cpp (stream_rows) and so to each row alone (row invariance): the form of the one-row GEMV
// (gemv_fp4_int_avx2.cpp, which has the argument for the bits) with each piece's decode shared by the rows.
//
// Why two rows: they are what many experts of a batched decode step see (64 sequences, 6 of 384 experts each: a fifth
// of the routed experts get two), and there the fp32 kernel took ~1.25x this one's time on Zen 3 (kernel calls on an
// L2-resident 256 x 2304 weight, 3 alternating series: min 12.9 -> 10.1, median 15.9 -> 13.9 TSC cycles per 64 B of
// codes and row; streamed by two threads, the expert w1 / w2 of 2 rows 0.80-0.85 of the time). Not 3-4 rows in the
// plain AVX2 form: per row this loop costs about the one-row GEMV's (its integer multiplies per 64 weights and row
// stay, 6 then and 5 now; the decode it shares is the small part), and the fp32 kernel, whose decode is the large part,
// shares it over more rows -- at 3-4 rows the two took the same time per row or the fp32 kernel less (as did int16
// weights against vpmaddwd, a scratch variant: 4 multiplies but 12 decode ops a piece). With AVX-VNNI (fp4_chunk.h
// AvxVnni) a row's products of a piece are 4 vpdpbusd, a plane's sum each, the high plane's shifted in once per piece
// and block: then 3-4 rows run here too (fp4_row_bytes).
//
// The loop: a block's pieces (32 bytes: 8 weight rows x 8 columns) one after the other, each through the
// block's 4 chunks with one int32 sum a row (two with VNNI; in the plain form two chunks' plane sums are added in
// int16 first, fp4_planes.h chunk_pair_sums); the activation planes come broadcast in the rows
// already (fp4_planes.h), so each multiply reads its dword vector from memory instead of a broadcast per dword and
// row. In the plain form a block that some row's planes do not hold goes row by row (fp4_planes.h planes_block):
// on Zen 1, one thread, `bench-ops --threads 1 --rows 2 --only "expert w" --per-call 200` (two alternating runs,
// 25th percentiles), the expert w2 of 2 SwiGLU rows 2472-2633 -> 2151-2325 us, w1 of normal rows 2156-2212 ->
// 1866-2137.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/fp4_planes.h"
#include "backend/cpu/x86/avx2/vnni_dot.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// R rows (the loops over them are unrolled) against G groups of a pair (packing.h; G = 1 for a lone last group),
// the pair read as one stream. Form: PlainAvx2 or AvxVnni (the plane sums by vpdpbusd).
template <int R, int G, class Form>
void rows_groups(const QuantGemmTask& t, int64_t g0) {
    const int64_t kb_count = t.k / 32;
    const Fp4RowLayout layout = fp4_row_layout(kb_count);
    const int64_t row_bytes = fp4_rows_bytes(kb_count);
    const uint8_t* codes =
        t.codes + packed_group(g0, t.groups, kb_count, Fp4Chunk::kBlockBytes, kPackedChunkBytes).offset;
    constexpr int64_t kChunkStride = G * kPackedChunkBytes, kBlockStride = G * Fp4Chunk::kBlockBytes;
    float* acc = t.scratch;            // [G][16]
    float* part = t.scratch + 16 * 2;  // [R][kb][G][16]: the block partials of each row
    const auto row = [&](int r) { return t.fp4_row + r * row_bytes; };
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Biased.v)));
    const __m256i nib = _mm256_set1_epi8(0x0f);
    // Each block's lines requested 6 KB ahead into L2, as the one-row GEMV's (fp4_chunk.h request_ahead) -- Zen 4,
    // EVEX VNNI form, 2 rows (`bench-ops --isa avx2 --rows 2 --only fp4 --per-call 30`, the two alternating call by
    // call, two rounds): w1 0.68-0.72x the time of 3 KB into L1 with two threads and 0.74-0.76x with one, w2 on
    // SwiGLU rows 0.85-0.87x, the grouped experts 0.98-1.01x; the plain form 0.91 / 0.97x (w1 / w2, two threads);
    // the AVX-VNNI form's 3-4 rows, which run here, take it unmeasured: no AVX-VNNI CPU at hand.
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        const uint8_t* block = codes + kb * kBlockStride;
#pragma GCC unroll 8
        for (int64_t b = 0; b < kBlockStride; b += 64)
            request_ahead(block + b);
        // The rows' decode is shared where every row's block fits two planes; in the plain form a block that does
        // not for some row goes row by row (below), as the GEMV takes it: there the shared loop's two-plane sums of
        // the rows that need three planes or the chain were work thrown away (a fifth to a third of the blocks of
        // an expert's w2, on SwiGLU rows).
        bool shared = true;
        for (int r = 0; r < R; ++r) shared = shared && (row(r)[layout.exact + kb] & kFp4PlanesExact);
        shared = shared || Form::kVnni;
        // piece p: group p / 2, rows 0-7 (p even) or 8-15 of it
#pragma GCC unroll 1
        for (int p = 0; p < 2 * G && shared; ++p) {
            __m256i s[R];  // int32 sums of lo plane + 256 x hi plane, from the bias correction
            __m256i high[R];  // AvxVnni: the hi plane's sums, shifted into s at the end
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                s[r] = _mm256_set1_epi32(reinterpret_cast<const int32_t*>(row(r) + layout.base)[kb]);
                high[r] = _mm256_setzero_si256();
            }
            const uint8_t* piece = block + (p / 2) * kPackedChunkBytes + (p % 2) * 32;
            // row r's plane dwords [chunk c][lo0, lo1, hi0, hi1] of this block
            const auto planes = [&](int r) {
                return reinterpret_cast<const __m256i*>(row(r) + fp4_broadcast_offset(kb_count)) + kb * 16;
            };
            if constexpr (Form::kVnni) {
#pragma GCC unroll 4
                for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
                    const PieceWeights w = piece_weights(piece + c * kChunkStride, lut, nib);
#pragma GCC unroll 4
                    for (int r = 0; r < R; ++r) {
                        const __m256i* pc = planes(r) + 4 * c;
                        s[r] = dpbusd<Form>(dpbusd<Form>(s[r], w.w0, pc[0]), w.w1, pc[1]);
                        high[r] = dpbusd<Form>(dpbusd<Form>(high[r], w.w0, pc[2]), w.w1, pc[3]);
                    }
                }
            } else {
#pragma GCC unroll 2
                for (int c = 0; c < Fp4Chunk::kChunks; c += 2) {
                    const PieceWeights a = piece_weights(piece + c * kChunkStride, lut, nib);
                    const PieceWeights b = piece_weights(piece + (c + 1) * kChunkStride, lut, nib);
#pragma GCC unroll 4
                    for (int r = 0; r < R; ++r) s[r] = chunk_pair_sums(a, b, planes(r) + 4 * c, s[r]);
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                if constexpr (Form::kVnni) s[r] = _mm256_add_epi32(s[r], _mm256_slli_epi32(high[r], 8));
                const float unit = reinterpret_cast<const float*>(row(r) + layout.unit)[kb];
                _mm256_store_ps(part + (r * kb_count + kb) * G * 16 + 8 * p,
                                _mm256_mul_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(unit)));
            }
        }
        // the rows' blocks the shared loop did not take (a block the planes do not hold: its partials again), as the
        // one-row GEMV takes them
#pragma GCC unroll 1
        for (int r = 0; r < R; ++r) {
            const uint8_t flags = row(r)[layout.exact + kb];
            if (shared && (flags & kFp4PlanesExact)) continue;
            __m256 q[G][2];
            const auto* planes = reinterpret_cast<const int32_t*>(row(r) + 64 * kb);
            const auto* broadcast = reinterpret_cast<const __m256i*>(row(r) + fp4_broadcast_offset(kb_count)) + kb * 16;
            const auto* top = reinterpret_cast<const int32_t*>(row(r) + layout.top + 32 * kb);
            const int32_t base = reinterpret_cast<const int32_t*>(row(r) + layout.base)[kb];
            const float unit = reinterpret_cast<const float*>(row(r) + layout.unit)[kb];
            if (flags & kFp4PlanesExact)
                planes_block<G, 2>(planes, broadcast, top, base, unit, block, q);
            else if (flags & kFp4SumsExact)
                planes_block<G, 3>(planes, broadcast, top, base, unit, block, q);
            else
                chain_block<G>(static_cast<const float*>(t.acts) + r * t.k + kb * 32, block, q);
            for (int g = 0; g < G; ++g) {
                _mm256_store_ps(part + ((r * kb_count + kb) * G + g) * 16, q[g][0]);
                _mm256_store_ps(part + ((r * kb_count + kb) * G + g) * 16 + 8, q[g][1]);
            }
        }
    }
    const __m256 f = _mm256_set1_ps(Fp4Chunk::kValueScale);
    const uint8_t* scales = pair_pieces(t.scales, t, g0, Fp4Chunk::kScaleBytes);
    for (int r = 0; r < R; ++r)
        scale_partials_and_store<G>(
            t, g0, part + r * kb_count * G * 16, acc, f,
            [&](int g, int64_t kb, __m256& sw0, __m256& sw1) {
                fp4_scales_at(t, scales + (kb * G + g) * Fp4Chunk::kScaleBytes, sw0, sw1);
            },
            r);
}

template <int R, class Form>
void rows_pairs(const QuantGemmTask& t) {
    for (int64_t g = 0; g < t.groups; g += 2) {
        if (g + 2 <= t.groups) rows_groups<R, 2, Form>(t, g);
        else rows_groups<R, 1, Form>(t, g);
    }
}

// Out of line: the form's code stays in functions named with it (tests/ops/avx2_isa_check.py). 3-4 rows come here
// only with VNNI (fp4_row_bytes gives the plain form's to the fp32 kernel, or to the panel: fp4_panel_rows).
template <class Form>
__attribute__((noinline)) void rows_of_task(const QuantGemmTask& t) {
    if constexpr (Form::kVnni) {
        if (t.n == 3) return rows_pairs<3, Form>(t);
        if (t.n == 4) return rows_pairs<4, Form>(t);
    }
    rows_pairs<2, Form>(t);
}

}  // namespace

void gemm_fp4_few_rows(const QuantGemmTask& t) {
    with_form([&]<class Form>(Form) { rows_of_task<Form>(t); });
}

}  // namespace deepinfer::backend::cpu::avx2
