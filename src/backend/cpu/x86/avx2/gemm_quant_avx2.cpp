// AVX2 block-scaled GEMMs (fp8 x fp8, fp8 x MXFP4) on the packed layouts of backend/cpu/packing.h. Weights
// are decoded to fp32 columns of 8 rows (fp8 through the F16C converter as value * 2^-8, or the same values by
// placing bits (fp8_bits_chunk.h); e2m1 through an
// int8 table as 2^25 * value) and activation rows run over them with FMAs in column order.
// Products are exact, so each FMA rounds like the reference's `partial += a * w`: the block partials,
// and with them the whole result, are bit-identical to the scalar reference (spec §4.3).
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/avx2/fp4_chunk.h"
#include "backend/cpu/x86/avx2/fp8_bits_chunk.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// Decoders of one 64-byte chunk (packing.h) into fp32 column vectors: f(j, rows 0-7, rows 8-15) receives
// column j of the chunk for both halves of the row group. Decoded values are weight / kValueScale.
// kNanCodes: patch codes 0x7f / 0xff to fp16 NaN; a weight without them (PackedWeight::plain_codes) skips
// that (4 of the ~14 vector ops of a 32-byte decode; in cache +11% at n = 1).
template <bool kNanCodes>
struct Fp8Chunk {
    static constexpr int kCols = 4, kChunks = 8;
    static constexpr int64_t kBlockBytes = 512, kScaleBytes = 1;  // a group's block: 16x32 codes, one scale
    static constexpr float kValueScale = 256.0f;  // through F16C as value * 2^-8
    static constexpr float kActScale = 1.0f;
    static constexpr bool kBroadcastActs = false;
    // 32 bytes (8 rows x 4 columns) -> fp16 words: lane 0 columns 0 | 1, lane 1 columns 2 | 3
    static inline void to_fp16(const uint8_t* p, __m256i& w01, __m256i& w23) {
        // per 128-bit lane: the bytes of columns 0, 1, 2, 3 of the lane's 4 rows, one dword each
        const __m256i gather = _mm256_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 0, 2, 4, 6, 1, 3,
                                                5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
        const __m256i sign = _mm256_set1_epi8(static_cast<char>(0x80));
        __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        // lane 0: columns 0, 1 of rows 0-7 (8 bytes each); lane 1: columns 2, 3
        v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, gather), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        // e4m3 -> fp16 bytes: sign | eeee mmm shifted right by one bit (value * 2^-8, subnormals too);
        // code 0x7f / 0xff becomes 0x7f80 / 0xff80, an fp16 NaN
        __m256i hi = _mm256_or_si256(_mm256_and_si256(v, sign),
                                     _mm256_and_si256(_mm256_srli_epi16(v, 1), _mm256_set1_epi8(0x3f)));
        if constexpr (kNanCodes) {
            const __m256i nan = _mm256_cmpeq_epi8(_mm256_or_si256(v, sign), _mm256_set1_epi8(-1));
            hi = _mm256_or_si256(hi, _mm256_and_si256(nan, _mm256_set1_epi8(0x40)));
        }
        const __m256i lo = _mm256_and_si256(_mm256_slli_epi16(v, 7), sign);
        w01 = _mm256_unpacklo_epi8(lo, hi);
        w23 = _mm256_unpackhi_epi8(lo, hi);
    }
    template <class F>
    inline void decode(const uint8_t* p, const F& f) const {
        __m256i a01, a23, b01, b23;
        to_fp16(p, a01, a23);
        to_fp16(p + 32, b01, b23);
        f(0, _mm256_cvtph_ps(_mm256_castsi256_si128(a01)), _mm256_cvtph_ps(_mm256_castsi256_si128(b01)));
        f(1, _mm256_cvtph_ps(_mm256_castsi256_si128(a23)), _mm256_cvtph_ps(_mm256_castsi256_si128(b23)));
        f(2, _mm256_cvtph_ps(_mm256_extracti128_si256(a01, 1)), _mm256_cvtph_ps(_mm256_extracti128_si256(b01, 1)));
        f(3, _mm256_cvtph_ps(_mm256_extracti128_si256(a23, 1)), _mm256_cvtph_ps(_mm256_extracti128_si256(b23, 1)));
    }
};

// R activation rows starting at i0 against the G groups of one pair (packing.h; G = 1 for a lone last
// group): the groups take turns within each block, so the pair is read as one stream; each half chunk is
// decoded and used at once by every row (columns in order per lane: the block partials are the
// reference's, bit for bit).
template <int R, int G, class Chunk, class Scales>
void stream_rows(const QuantGemmTask& t, const Chunk& chunk, const Scales& scales_of, int64_t g0, int64_t i0) {
    const int64_t kb_count = t.k / 32;
    constexpr int64_t kLanes = Chunk::kBroadcastActs ? 8 : 1;
    const float* a = static_cast<const float*>(t.acts) + i0 * t.k * kLanes;
    float* acc = t.scratch;  // [G][R][16]
    for (int e = 0; e < 16 * R * G; e += 8) _mm256_store_ps(acc + e, _mm256_setzero_ps());
    // G = 2 only for a whole pair, G = 1 only for a lone group: the strides are G chunks and G blocks
    const uint8_t* codes = t.codes + packed_group(g0, t.groups, kb_count, Chunk::kBlockBytes, kPackedChunkBytes).offset;
    const uint8_t* scales = pair_pieces(t.scales, t, g0, Chunk::kScaleBytes);
    constexpr int64_t kPieceStride = G * kPackedChunkBytes, kBlockStride = G * Chunk::kBlockBytes;
    const __m256 f = _mm256_set1_ps(Chunk::kValueScale);
    for (int64_t kb = 0; kb < kb_count; ++kb) {
#pragma GCC unroll 1
        for (int g = 0; g < G; ++g) {
            __m256 p[R][2];
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) p[r][0] = p[r][1] = _mm256_setzero_ps();
            const uint8_t* block = codes + kb * kBlockStride + g * kPackedChunkBytes;
#pragma GCC unroll 1
            for (int c = 0; c < Chunk::kChunks; ++c) {
                _mm_prefetch(reinterpret_cast<const char*>(block + c * kPieceStride + kPrefetchBytes), _MM_HINT_T0);
                if constexpr (Chunk::kBroadcastActs) {
                    // Fp8BitsHalfRate: half chunk by half chunk, the activations read broadcast [n][k][8]
                    const float* xc = a + (kb * 32 + c * Chunk::kCols) * 8;
#pragma GCC unroll 2
                    for (int h = 0; h < 2; ++h) {
                        const typename Chunk::Split sp = Chunk::split(block + c * kPieceStride + 32 * h);
#pragma GCC unroll 4
                        for (int j = 0; j < Chunk::kCols; ++j) {
                            const __m256 col = Chunk::column(sp, j);  // rows 0-7 (h = 0) or 8-15 of column j
#pragma GCC unroll 4
                            for (int r = 0; r < R; ++r)
                                p[r][h] = _mm256_fmadd_ps(col, _mm256_load_ps(xc + (r * t.k + j) * 8), p[r][h]);
                        }
                    }
                } else {
                    chunk.decode(block + c * kPieceStride, [&](int j, __m256 col0, __m256 col1) {
                        const int64_t k = kb * 32 + c * Chunk::kCols + j;
#pragma GCC unroll 4
                        for (int r = 0; r < R; ++r) {
                            const __m256 x = _mm256_broadcast_ss(a + r * t.k + k);
                            p[r][0] = _mm256_fmadd_ps(col0, x, p[r][0]);
                            p[r][1] = _mm256_fmadd_ps(col1, x, p[r][1]);
                        }
                    });
                }
            }
            __m256 sw0, sw1;
            scales_of(scales + (kb * G + g) * Chunk::kScaleBytes, sw0, sw1);
            sw0 = _mm256_mul_ps(sw0, f);
            sw1 = _mm256_mul_ps(sw1, f);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r)
                scale_into(acc + 16 * (g * R + r), p[r][0], p[r][1], sw0, sw1,
                           t.act_scales[(i0 + r) * kb_count + kb]);
        }
    }
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) store_rows(t, g0 + g, i0 + r, acc + 16 * (g * R + r));
}

// Part i of n rows cut into `parts` parts as even as they go (the first n % parts one row longer): the stream's turns
// and the panel's tiles, where a short last part would run few FMA chains, held by their latency.
inline int64_t even_part(int64_t n, int64_t parts, int64_t i) { return n / parts + (i < n % parts ? 1 : 0); }

// Pair by pair; a lone last group on its own.
template <int R, class Chunk, class Scales>
void stream_all(const QuantGemmTask& t, const Chunk& chunk, const Scales& scales_of, int64_t i0 = 0) {
    int64_t g = 0;
    for (; g + 2 <= t.groups; g += 2) stream_rows<R, 2>(t, chunk, scales_of, g, i0);
    if (g < t.groups) stream_rows<R, 1>(t, chunk, scales_of, g, i0);
}

// Many activation rows: the row group is decoded once into an L2 panel [k][16] (fp32) with its scales,
// then tiles of R rows run over all of k (partials in registers, accumulators in L1); the first tile asks for the
// next group's codes (NextGroup).
template <int R, int kPieces>
void panel_tile(const QuantGemmTask& t, const float* panel, const float* sw, int64_t g, int64_t i0,
                const NextGroup& next) {
    const int64_t kb_count = t.k / 32;
    const float* a = static_cast<const float*>(t.acts) + i0 * t.k;
    float* acc = t.scratch;
    for (int e = 0; e < 16 * R; e += 8) _mm256_store_ps(acc + e, _mm256_setzero_ps());
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        next.prefetch_block<kPieces>(kb);
        __m256 p[R][2];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) p[r][0] = p[r][1] = _mm256_setzero_ps();
        for (int64_t k = kb * 32; k < kb * 32 + 32; ++k) {
            const __m256 w0 = _mm256_load_ps(panel + k * 16), w1 = _mm256_load_ps(panel + k * 16 + 8);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const __m256 x = _mm256_broadcast_ss(a + r * t.k + k);
                p[r][0] = _mm256_fmadd_ps(w0, x, p[r][0]);
                p[r][1] = _mm256_fmadd_ps(w1, x, p[r][1]);
            }
        }
        const __m256 sw0 = _mm256_load_ps(sw + kb * 16), sw1 = _mm256_load_ps(sw + kb * 16 + 8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
            scale_into(acc + 16 * r, p[r][0], p[r][1], sw0, sw1, t.act_scales[(i0 + r) * kb_count + kb]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) store_rows(t, g, i0 + r, acc + 16 * r);
}

template <class Chunk, class Scales>
void run(const QuantGemmTask& t, const Chunk& chunk, const Scales& scales_of) {
    const int64_t kb_count = t.k / 32;
    float* panel = t.scratch + kActRowChunk * 16;
    float* sw = panel + 16 * t.k;
    // Fp8BitsChunk / Fp8BitsHalfRate: t.bits_acts, which fp8_bits_acts makes for at most fp8_stream_rows() rows
    // (gemm_fp8), so these decodes always stream; the panel below is the other chunks'
    constexpr bool kBits = Chunk::kActScale != 1.0f;
    if (kBits || t.n <= kStreamRows) {
        QuantGemmTask s = t;
        if constexpr (kBits) {
            if (t.n == 1) return gemv_fp8_bits(t);  // one row comes broadcast (fp8_bits_acts), for that kernel
            s.acts = t.bits_acts;                   // [n, k]
        }
        // more than kStreamRows rows (Fp8BitsHalfRate: fp8_stream_rows) in turns of 2-4 rows, as even as they go:
        // a turn of one row would run two FMA chains a group, held by their latency
        const int64_t turns = (t.n + kStreamRows - 1) / kStreamRows;
        for (int64_t turn = 0, i0 = 0; turn < turns; ++turn) {
            const int64_t rows = even_part(t.n, turns, turn);
            switch (rows) {
                case 1: stream_all<1>(s, chunk, scales_of, i0); break;  // (t.n == 1 without the bits decode)
                case 2: stream_all<2>(s, chunk, scales_of, i0); break;
                case 3: stream_all<3>(s, chunk, scales_of, i0); break;
                default: stream_all<4>(s, chunk, scales_of, i0); break;
            }
            i0 += rows;
        }
        return;
    }
    if constexpr (!kBits) {
        for (int64_t g = 0; g < t.groups; ++g) {
            const PackedGroup pg = packed_group(g, t.groups, kb_count, Chunk::kBlockBytes, kPackedChunkBytes);
            const uint8_t* codes = t.codes + pg.offset;
            const __m256 f = _mm256_set1_ps(Chunk::kValueScale);
            for (int64_t kb = 0; kb < kb_count; ++kb) {
#pragma GCC unroll 1
                for (int c = 0; c < Chunk::kChunks; ++c) {
                    const uint8_t* piece = codes + kb * pg.block_stride + c * pg.piece_stride;
                    chunk.decode(piece, [&](int j, __m256 col0, __m256 col1) {
                        float* dst = panel + (kb * 32 + c * Chunk::kCols + j) * 16;
                        _mm256_store_ps(dst, col0);
                        _mm256_store_ps(dst + 8, col1);
                    });
                }
                __m256 sw0, sw1;
                scales_of(t.scales + packed_scale_offset(g, t.groups, kb, kb_count, Chunk::kScaleBytes), sw0, sw1);
                _mm256_store_ps(sw + kb * 16, _mm256_mul_ps(sw0, f));
                _mm256_store_ps(sw + kb * 16 + 8, _mm256_mul_ps(sw1, f));
            }
            constexpr int kPieces = Chunk::kChunks;
            NextGroup next = next_group<Chunk>(t, g);
            // tiles of at most 6 rows, as even as they go: a last tile of 1-2 rows would run 2-4 FMA chains, held by
            // their latency
            const int64_t tiles = (t.n + 5) / 6;
            for (int64_t tile = 0, i = 0; tile < tiles; ++tile, next = NextGroup{}) {
                const int64_t rows = even_part(t.n, tiles, tile);
                switch (rows) {
                    case 6: panel_tile<6, kPieces>(t, panel, sw, g, i, next); break;
                    case 5: panel_tile<5, kPieces>(t, panel, sw, g, i, next); break;
                    case 4: panel_tile<4, kPieces>(t, panel, sw, g, i, next); break;
                    case 3: panel_tile<3, kPieces>(t, panel, sw, g, i, next); break;
                    case 2: panel_tile<2, kPieces>(t, panel, sw, g, i, next); break;
                    default: panel_tile<1, kPieces>(t, panel, sw, g, i, next); break;
                }
                i += rows;
            }
        }
    }
}

}  // namespace

// Activations for Fp8BitsChunk (x 2^119), for at most fp8_stream_rows() rows: e4m3 values always; bf16 rows when every
// value is 0 or of magnitude in [2^-100, 2^9) (so no NaN / infinity either). Several rows as [n, k]; one row, for
// gemv_fp8_bits, and every row where Fp8BitsHalfRate's stream reads them (kBroadcastActs) broadcast: each value 8
// times, [n][k][8].
bool broadcast_bits_acts(int64_t n) { return n == 1 || (Fp8BitsHalfRate::kBroadcastActs && ymm_half_rate()); }

int64_t fp8_bits_acts_bytes(int64_t n, int64_t k) {
    return (broadcast_bits_acts(n) ? 8 : 1) * n * k * static_cast<int64_t>(sizeof(float));
}

bool fp8_bits_acts(const void* acts, int64_t n, int64_t k, bool e4m3, void* out) {
    if (n > fp8_stream_rows()) return false;
    const float* a = static_cast<const float*>(acts);
    float* o = static_cast<float*>(out);
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 lo = _mm256_set1_ps(0x1p-100f), hi = _mm256_set1_ps(0x1p9f), zero = _mm256_setzero_ps();
    const __m256 scale = _mm256_set1_ps(Fp8BitsChunk::kActScale);
    const bool broadcast = broadcast_bits_acts(n);
    __m256 bad = zero;
    for (int64_t i = 0; i < n * k; i += 8) {  // k is a multiple of 32
        const __m256 v = _mm256_loadu_ps(a + i);
        const __m256 scaled = _mm256_mul_ps(v, scale);
        if (broadcast) {
            alignas(32) float s[8];
            _mm256_store_ps(s, scaled);
#pragma GCC unroll 8
            for (int l = 0; l < 8; ++l) _mm256_store_ps(o + 8 * (i + l), _mm256_set1_ps(s[l]));
        } else {
            _mm256_storeu_ps(o + i, scaled);
        }
        if (e4m3) continue;
        // outside: NaN (unordered), >= 2^9, or nonzero below 2^-100
        const __m256 m = _mm256_and_ps(v, magnitude);
        const __m256 in_range = _mm256_and_ps(_mm256_cmp_ps(m, lo, _CMP_GE_OQ), _mm256_cmp_ps(m, hi, _CMP_LT_OQ));
        const __m256 ok = _mm256_or_ps(_mm256_cmp_ps(m, zero, _CMP_EQ_OQ), in_range);
        bad = _mm256_or_ps(bad, _mm256_andnot_ps(ok, _mm256_castsi256_ps(_mm256_set1_epi32(-1))));
    }
    return _mm256_movemask_ps(bad) == 0;
}

void gemm_fp8(const QuantGemmTask& t) {
    // the block's scale (kScaleBytes at s)
    auto scales = [](const uint8_t* s, __m256& sw0, __m256& sw1) { sw0 = sw1 = _mm256_set1_ps(e8m0_to_float(*s)); };
    // The bit-placing decode hands subnormal weights to the FMAs as fp32 subnormals (so not under DAZ) and needs
    // activations whose 2^119 scaling stays finite and whose products stay normal: e4m3 values always are;
    // bf16 rows (gemm_fp8_bf16x) when every value is 0 or 2^-100 <= |a| < 2^9 (then every product and partial
    // sum is a multiple of 2^-120 at least, above fp32's subnormals). fp8_bits_acts checked that and scaled them,
    // once per thread and GEMM (t.bits_acts).
    const bool daz = (_mm_getcsr() & 0x0040u) != 0;
    if (t.plain_codes && t.n <= fp8_stream_rows() && !daz && t.bits_acts) {
        if (ymm_half_rate()) run(t, Fp8BitsHalfRate{}, scales);
        else run(t, Fp8BitsChunk{}, scales);
    }
    else if (t.plain_codes && ymm_half_rate() && !daz) run(t, Fp8BitsPanel{}, scales);  // Fp8Chunk's values
    else if (t.plain_codes) run(t, Fp8Chunk<false>{}, scales);
    else run(t, Fp8Chunk<true>{}, scales);
}

void gemm_fp4(const QuantGemmTask& t) {
    if (fp4_panel_rows(t.n) && t.fp4_row) return gemm_fp4_int(t);
    if (t.n == 1 && t.fp4_row) return gemv_fp4_int(t);
    if (t.fp4_row) return gemm_fp4_few_rows(t);
    run(t, Fp4Chunk{}, [&](const uint8_t* s, __m256& sw0, __m256& sw1) { fp4_scales_at(t, s, sw0, sw1); });
}

// e4m3 codes to fp32 through the F16C converter: the code's 7 magnitude bits moved to fp16 bits 13..7 make the
// fp16 of value * 2^-8 (subnormal codes included), times 256 exactly; codes 0x7f / 0xff become the fp16 quiet
// NaN with their sign, so the fp32 NaN of the table (tables::kE4M3) as well.
void decode_acts(const uint8_t* codes, const uint8_t* scales, int64_t n, int64_t k, void* values, float* act_scales) {
    auto* out = static_cast<float*>(values);
    const int64_t total = n * k;
    const __m128i magnitude = _mm_set1_epi16(0x7f), sign = _mm_set1_epi16(0x80), quiet_nan = _mm_set1_epi16(0x7e00);
    const __m256 scale = _mm256_set1_ps(256.0f);
    int64_t i = 0;
    for (; i + 8 <= total; i += 8) {
        const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
        const __m128i m = _mm_and_si128(c, magnitude), s = _mm_slli_epi16(_mm_and_si128(c, sign), 8);
        const __m128i h = _mm_blendv_epi8(_mm_or_si128(s, _mm_slli_epi16(m, 7)), _mm_or_si128(s, quiet_nan),
                                          _mm_cmpeq_epi16(m, magnitude));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtph_ps(h), scale));
    }
    for (; i < total; ++i) out[i] = tables::kE4M3.v[codes[i]];
    for (int64_t j = 0; j < n * (k / 32); ++j) act_scales[j] = e8m0_to_float(scales[j]);
}

}  // namespace deepinfer::backend::cpu::avx2
