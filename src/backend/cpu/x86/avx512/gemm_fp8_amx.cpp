// The fp8 x fp8 block-scaled GEMM (spec §4.3) on AMX tiles, every row count, on CPUs where amx_enabled().
//
// The operands enter the tiles already scaled: each activation row a * sa * 2^ca (fp8_tile_acts, once per thread
// and GEMM) and each weight block w * sw * 2^cw (at its decode), exact in bf16, with powers of two ca (per row) and
// cw (per pair of row groups) that put every operand and product in fp32's normal range (the window below). So the
// tile sums a row's products over the whole of k in one C tile, tdpbf16ps after tdpbf16ps, and the result is
// scaled back by 2^-(ca + cw) in one vscalefps and rounded to bf16 once.
//
// Why: summing per 32-column block (a C tile zeroed, multiplied, stored and scaled for every block, as the MXFP4
// kernel still does in gemm_amx.cpp) spent more cycles on the tile stores than on the products (a scratch loop
// on the Intel Xeon: 65-69 TSC cycles per block of four products with the sums left in the tiles, 134-145 with
// the C tiles stored and zeroed each block, 187-204 with the scaling too). In cache, one core, 256x2048 (GFLOP/s,
// docs/PERFORMANCE.md): n = 64 470-514 -> 670-749, n = 16 356-390 -> 439-490, n = 4 180-194 -> 191-212, n = 1
// 48-49 -> 53-59.
//
// Numerics (docs/numerics.md): the products are the reference's, exact; their sum is an fp32 sum over all of k in
// the tile unit's order instead of a sum per block scaled and accumulated in block order -- an fp32 dot product in
// another order, as another ISA's. A row's sums do not depend on the other rows of its tile or on how many there
// are, and every pass below gives each product the same value and accumulates in the same order, so a row's
// result does not depend on its batch. Rows and pairs whose operands the window cannot hold (exponents spread
// wider than kActSpan or kScaleSpan, NaN or infinite values, a NaN or non-power-of-two scale) take the vdpbf16ps
// kernel (gemm_quant_avx512.cpp), decided by the row alone or by the pair alone.
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/x86/avx512/amx_tiles.h"
#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/avx512/block_decode.h"
#include "backend/cpu/x86/isa_ops.h"
#include "core/cpu_features.h"
#include "core/scratch_pool.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// The operand window. An activation row's largest value lies in [2^kActTop, 2^(kActTop + 1)), its smallest nonzero
// one at most kActSpan binades lower: in [2^-106, 2^-37). A pair's scale codes span at most kScaleSpan: w sw 2^cw,
// the largest below 448 * 2^44 < 2^53, lies in [2^-17, 2^53). So every product lies in [2^-123, 2^16), and k < 2^20
// of them sum below 2^36. Where few rows take the weights' scales onto the activations instead (PairPass
// kScaleActs), a sa 2^ca sw 2^cw lies in [2^-114, 2^7) against the codes w, or 2^120 times that, in [2^6, 2^127),
// against the bits decode's w 2^-120 in [2^-126, 2^-111): the same products, all operands normal and finite.
constexpr int kActTop = -38, kActSpan = 68, kScaleSpan = 52, kWeightShift = 44;
constexpr int64_t kMaxK = int64_t{1} << 20;
constexpr int64_t kFp8BlockBytes = 512;  // a group's 16 x 32 codes (packing.h)

// A pair's weight scaling: cw = shift, or wide (its scale codes span more than kScaleSpan, or one is NaN).
struct PairScaling {
    bool wide;
    int shift;
};
PairScaling pair_scaling(const uint8_t* scales, int64_t count) {
    const ScaleCodeRange r = scale_code_range(scales, count);
    if (r.hi == 255 || r.hi - r.lo > kScaleSpan) return {true, 0};
    return {false, kWeightShift - (r.hi - 127)};  // sw 2^cw <= 2^kWeightShift
}

// The e4m3 -> bf16 lookup (as Fp8ToBf16: a byte permute for each half of the word, the sign or-ed in) with the
// block's exponent offset d folded into its tables: the high bytes (sign and the exponent's top 7 bits) plus d / 2
// (rounded down), of w or, for odd d, of 2w (tables::kE4M3Bf16Twice*); the entries of zero and NaN as they are. So
// a block's words come out as w * 2^d for 2 masked byte adds per group and block, rather than 2 operations per 32
// words on the decoded vectors (in cache: n = 4 +20%, n = 16 +10%, n = 64 +11-16%). The window keeps every exponent
// in range.
struct ScaledLookup {
    Fp8ToBf16 w;                 // the lookup of w
    __m512i twice[2][2];         // the tables of 2w: high bytes, low bytes; codes 0-63, 64-127
    struct Tables {
        __m512i hi0, hi1, lo0, lo1;
    };
    ScaledLookup() {
        for (int h = 0; h < 2; ++h) {
            twice[0][h] = _mm512_load_si512(tables::kE4M3Bf16TwiceHi.v + 64 * h);
            twice[1][h] = _mm512_load_si512(tables::kE4M3Bf16TwiceLo.v + 64 * h);
        }
    }
    // The tables of w * 2^d (kScaled), or of w.
    template <bool kScaled>
    Tables tables(int d) const {
        if constexpr (!kScaled) return {w.hi0, w.hi1, w.lo0, w.lo1};
        const int p = d & 1;
        Tables t = p ? Tables{twice[0][0], twice[0][1], twice[1][0], twice[1][1]} : Tables{w.hi0, w.hi1, w.lo0, w.lo1};
        const __m512i j = _mm512_set1_epi8(static_cast<char>((d - p) / 2));
        // all entries but code 0 (byte 0 of the first half) and the NaN code 0x7f (byte 63 of the second)
        t.hi0 = _mm512_mask_add_epi8(t.hi0, ~__mmask64{1}, t.hi0, j);
        t.hi1 = _mm512_mask_add_epi8(t.hi1, ~(__mmask64{1} << 63), t.hi1, j);
        return t;
    }
    inline void decode(const Tables& t, __m512i codes, __m512i* v) const {
        Fp8ToBf16::lookup(t.hi0, t.hi1, t.lo0, t.lo1, w.sign, codes, v[0], v[1]);
    }
};

// The decoders of the two passes: the weights' offsets folded into the lookup's tables, or (kScaleActs, the offsets
// on the activations) the codes as they are -- the lookup, or on blocks without subnormal codes of weights without
// NaN codes the bit placing (Fp8Bits: w * 2^-120).
struct Fp8ScaledDecode {
    ScaledLookup lookup;
    Fp8Bits bits;
};

// Block kb of a pair (G groups; scales [kb][G], flags likewise or null): group g's decoder and exponent offset d[g],
// which takes its decoded words to w * sw * 2^shift (the bits decode's w * 2^-120 needs 120 more).
template <int G>
struct BlockDeltas {
    bool bits[2] = {};
    int d[2] = {};
    BlockDeltas(const uint8_t* scales, const uint8_t* flags, int64_t kb, int shift) {
        for (int g = 0; g < G; ++g) {
            bits[g] = flags && flags[kb * G + g] == 0;
            d[g] = scales[kb * G + g] - 127 + shift + (bits[g] ? 120 : 0);
        }
    }
};

// Chunk ch (of 8: 64 codes) of every group of a block, as decode_block below decodes it (t: each group's tables):
// rows 2 ch and 2 ch + 1 of each group's B tile.
template <int G, Prefetch kAhead, bool kScaled, bool kBits0, bool kBits1>
inline void decode_block_chunk(const Fp8ScaledDecode& f, const ScaledLookup::Tables* t, const uint8_t* block, int ch,
                               uint32_t* b) {
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
        const uint8_t* chunk = block + (ch * G + g) * kPackedChunkBytes;
        __m512i v[2];
        if (!kScaled && (g == 0 ? kBits0 : kBits1)) f.bits.decode(chunk, v);
        else f.lookup.decode(t[g], _mm512_load_si512(chunk), v);
        prefetch_ahead<kAhead>(chunk, v[0]);
        uint32_t* bg = b + g * (kBlockPairs * 16);
        _mm512_store_si512(bg + (2 * ch) * 16, v[0]);
        _mm512_store_si512(bg + (2 * ch + 1) * 16, v[1]);
    }
}

// Block kb of a pair (its G groups' chunks interleaved, packing.h) into b, group g's B tile at b + g * 256: kScaled
// (d without flags), w * sw * 2^shift by the scaled lookup; else the codes as they are, group g by the bits where
// kBits<g>.
template <int G, Prefetch kAhead, bool kScaled, bool kBits0, bool kBits1>
void decode_block(const Fp8ScaledDecode& f, const uint8_t* block, const BlockDeltas<G>& d, uint32_t* b) {
    ScaledLookup::Tables t[G];
    for (int g = 0; g < G; ++g) t[g] = f.lookup.tables<kScaled>(d.d[g]);
#pragma GCC unroll 8
    for (int ch = 0; ch < 8; ++ch) decode_block_chunk<G, kAhead, kScaled, kBits0, kBits1>(f, t, block, ch, b);
}

template <int G, Prefetch kAhead, bool kScaled>
void decode_pair_block(const Fp8ScaledDecode& f, const uint8_t* block, const BlockDeltas<G>& d, uint32_t* b) {
    if constexpr (kScaled) {
        decode_block<G, kAhead, true, false, false>(f, block, d, b);
    } else if constexpr (G == 1) {
        if (d.bits[0]) decode_block<1, kAhead, false, true, true>(f, block, d, b);
        else decode_block<1, kAhead, false, false, false>(f, block, d, b);
    } else if (d.bits[0] && d.bits[1]) {
        decode_block<2, kAhead, false, true, true>(f, block, d, b);
    } else if (d.bits[0]) {
        decode_block<2, kAhead, false, true, false>(f, block, d, b);
    } else if (d.bits[1]) {
        decode_block<2, kAhead, false, false, true>(f, block, d, b);
    } else {
        decode_block<2, kAhead, false, false, false>(f, block, d, b);
    }
}

// A pair's sums of m rows (c[g]: group g's, 16 weight rows each) back to the task's output: times 2^-(ca + cw),
// rounded once. Row by row, both groups together: a row's 32 outputs fill one line of a bf16 output at once
// (group by group, each line was written twice, half at a time: wq_b's 256 x 32768 outputs took 18% of its time).
//
// `stream` (runs of more than 16 rows): a bf16 row's whole line (both groups' 32 outputs, 64 bytes aligned) goes out
// by a non-temporal store, which needs no read of the line first. Each line read for ownership from memory held one
// of the fill buffers the weight's stream needs, and a prefill's outputs leave the caches before anything reads them
// (the weight streams after them). gemm_fp8_amx ends with an sfence: the pool's hand-off orders plain stores only.
// `bench-ops --only wq_b / wo_a --rows 64 256 1024`, two threads, alternating rounds: wq_b n = 256 9445-10975 ->
// 8447-9344 us, n = 1024 41.2-45.5 -> 32.4-36.2 ms, n = 64 the same; wo_a n = 256 7266-7668 -> 6999-7256 us.
void store_scaled_back(const QuantGemmTask& t, const float (*c)[256], int G, int m, int64_t i0, int64_t g0,
                       int pair_shift, bool stream = false) {
    const bool whole_lines = stream && G == 2 && !t.out_f32 && t.rows - g0 * 16 >= 32;
    for (int r = 0; r < m; ++r) {
        const int32_t row_shift = t.tile_shift[i0 + r];
        if (row_shift == kWideRow) continue;  // (fallback_rows writes it)
        const __m512 scale = _mm512_set1_ps(-static_cast<float>(row_shift + pair_shift));
        const int64_t line = (i0 + r) * t.ldo + g0 * 16;
        if (whole_lines && (reinterpret_cast<uintptr_t>(t.out + line) & 63) == 0) {
            stream_line(t.out + line, _mm512_scalef_ps(_mm512_load_ps(c[0] + r * 16), scale),
                        _mm512_scalef_ps(_mm512_load_ps(c[1] + r * 16), scale));
            continue;
        }
        for (int g = 0; g < G; ++g) {
            const __mmask16 mask = lane_mask(t.rows - (g0 + g) * 16);
            const __m512 v = _mm512_scalef_ps(_mm512_load_ps(c[g] + r * 16), scale);
            const int64_t at = (i0 + r) * t.ldo + (g0 + g) * 16;
            if (t.out_f32) store_row(t.out_f32 + at, mask, v);
            else store_row(t.out + at, mask, v);
        }
    }
}

// The pair's codes, scales and subnormal-block flags (null: the lookup only) of group g0 (even).
struct PairStreams {
    const uint8_t *codes, *scales, *flags;
    PairStreams(const QuantGemmTask& t, int64_t g0) {
        const int64_t kb_count = t.k / 32;
        codes = t.codes + packed_group(g0, t.groups, kb_count, kFp8BlockBytes, kPackedChunkBytes).offset;
        scales = t.scales + packed_scale_offset(g0, t.groups, 0, kb_count, 1);
        flags = t.block_flags ? t.block_flags + packed_scale_offset(g0, t.groups, 0, kb_count, 1) : nullptr;
    }
};

// Up to 16 activation rows against a pair's G groups, decoding as they stream: block kb + kAheadBlocks is decoded
// while kb is multiplied (a tileloadd of a buffer just written waits for its stores). C tile g sums group g over
// all of k. kScaleActs (up to kMaxScaledActRows rows): the weights' scales go onto a copy of the rows' block per
// group instead -- the B tiles hold the decoded codes as they are (w, or the bits decode's w 2^-120), A tile 2 + g
// the rows' a sa 2^ca times sw 2^cw (times 2^120 against the bits): the same products. In cache that ran n = 1 at
// 55 GFLOP/s against 43-45 with the scales in the lookup's tables, n = 5-10 +10-35%, n = 12 the same, n = 16 10%
// slower. Otherwise A (tile 2) is loaded once per block for both groups' B (tiles 4, 5), which hold w sw 2^cw.
// (Decoding two blocks ahead instead of one read 75-78% of the bandwidth at n = 1, streamed.)
constexpr int kAheadBlocks = 1, kRingBlocks = 4;
constexpr int kMaxScaledActRows = 12;
struct alignas(64) PairScratch {
    uint32_t b[kRingBlocks][2][kBlockPairs * 16];
    uint16_t a[kRingBlocks][2][kMaxScaledActRows * 32];  // kScaleActs: [block][group] rows x 32 bf16
    float c[2][kMaxTileRows * 16];
};

void configure_pair(int m) {
    TileConfig c;
    for (int g = 0; g < 2; ++g) {
        c.set(g, m, 64);
        c.set(2 + g, m, 64);
        c.set(4 + g, kBlockPairs, 64);
    }
    c.load();
}

template <int G, Prefetch kAhead, bool kScaleActs>
class PairPass {
   public:
    PairPass(const QuantGemmTask& t, PairScratch& s, int64_t g0, int m, int shift)
        : s_(s), streams_(t, g0), kb_count_(t.k / 32), m_(m), shift_(shift),
          acts_(static_cast<const uint32_t*>(t.tile_acts)) {}

    void run() {
        _tile_zero(0);
        if constexpr (G == 2) _tile_zero(1);
        for (int64_t kb = 0; kb < kAheadBlocks && kb < kb_count_; ++kb) decode(kb);
        for (int64_t kb = 0; kb < kb_count_; ++kb) {
            if (kb + kAheadBlocks < kb_count_) decode(kb + kAheadBlocks);
            const uint32_t* b = s_.b[kb % kRingBlocks][0];
            if constexpr (kScaleActs) {
                _tile_loadd(2, s_.a[kb % kRingBlocks][0], 64);
                _tile_loadd(4, b, 64);
                _tile_dpbf16ps(0, 2, 4);
                if constexpr (G == 2) {
                    _tile_loadd(3, s_.a[kb % kRingBlocks][1], 64);
                    _tile_loadd(5, b + kBlockPairs * 16, 64);
                    _tile_dpbf16ps(1, 3, 5);
                }
            } else {
                _tile_loadd(2, acts_ + kb * kTileBlockWords, 64);
                _tile_loadd(4, b, 64);
                _tile_dpbf16ps(0, 2, 4);
                if constexpr (G == 2) {
                    _tile_loadd(5, b + kBlockPairs * 16, 64);
                    _tile_dpbf16ps(1, 2, 5);
                }
            }
        }
        _tile_stored(0, s_.c[0], 64);
        if constexpr (G == 2) _tile_stored(1, s_.c[1], 64);
    }

   private:
    void decode(int64_t kb) {
        const uint8_t* block = streams_.codes + kb * G * kFp8BlockBytes;
        uint32_t* b = s_.b[kb % kRingBlocks][0];
        // the weights' offsets onto the activations (kScaleActs) or into the lookup's tables
        const BlockDeltas<G> d(streams_.scales, kScaleActs ? streams_.flags : nullptr, kb, shift_);
        decode_pair_block<G, kAhead, !kScaleActs>(dec_, block, d, b);
        if constexpr (kScaleActs) {
            const __m512i exponent = _mm512_set1_epi16(0x7f80);
            for (int g = 0; g < G; ++g) {
                const __m512i delta = _mm512_set1_epi16(static_cast<short>(d.d[g] << 7));
                for (int r = 0; r < m_; ++r) {
                    const __m512i v = _mm512_load_si512(acts_ + kb * kTileBlockWords + r * 16);
                    _mm512_store_si512(s_.a[kb % kRingBlocks][g] + r * 32,
                                       _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, exponent), v, delta));
                }
            }
        }
    }

    PairScratch& s_;
    PairStreams streams_;
    int64_t kb_count_;
    int m_, shift_;
    const uint32_t* acts_;
    Fp8ScaledDecode dec_;
};

// More than 16 rows (up to kTileItemRows): the pairs of a run of kTileRunPairs, k in chunks of kChunkBlocks blocks.
// For each chunk, each pair's chunk is decoded once into L1 (16 KB) and multiplied by every row tile of the task,
// two row tiles at a time (configure_tile_pair: C of row tile i and group g at 2 i + g, A of tile i at 4 + i, B of
// group g at 6 + g), so the B tiles come from L1 and only the A tiles from L2; the C tiles of each (pair, row tile)
// wait in the task's scratch (kTileSumsFloats) between chunks. A C tile still sums its row's products over all of
// k in block order -- stored and loaded whole in between -- so the results are those of one pass over k.
// Why: one pass over all of k per two row tiles read both A and B from L2 (a 1 KB tile load per product), and each
// pair was decoded once per kActRowChunk rows, a decode that hardly overlapped the products (docs/PERFORMANCE.md,
// "Nineteenth session": in cache, one core, n = 40-256 1.1-1.4x).
constexpr int64_t kChunkBlocks = 8;
struct alignas(64) ChunkBuffer {
    uint32_t b[kChunkBlocks][2][kBlockPairs * 16];  // [block][group]: B tiles
};

// Two row tiles (a1 null: one), their blocks from a0 / a1 (tile-blocked activations), against the chunk's blocks of
// a pair's G groups: C from c0 / c1 (each [group][256]; zeroed instead at the first chunk), the products, C back.
// after_block(j) runs after block j's products are issued (a share of the next chunk's decode).
template <int G, class AfterBlock>
void multiply_chunk(const uint32_t* a0, const uint32_t* a1, const ChunkBuffer& b, int64_t blocks, bool first,
                    float (*c0)[256], float (*c1)[256], AfterBlock&& after_block) {
    if (first) {
        zero_c_tiles<G>(0);
        if (a1) zero_c_tiles<G>(1);
    } else {
        load_c_tiles<G>(0, c0);
        if (a1) load_c_tiles<G>(1, c1);
    }
    for (int64_t j = 0; j < blocks; ++j) {
        _tile_loadd(6, b.b[j][0], 64);
        if constexpr (G == 2) _tile_loadd(7, b.b[j][1], 64);
        _tile_loadd(4, a0 + j * kTileBlockWords, 64);
        _tile_dpbf16ps(0, 4, 6);
        if constexpr (G == 2) _tile_dpbf16ps(1, 4, 7);
        if (a1) {
            _tile_loadd(5, a1 + j * kTileBlockWords, 64);
            _tile_dpbf16ps(2, 5, 6);
            if constexpr (G == 2) _tile_dpbf16ps(3, 5, 7);
        }
        after_block(j);
    }
    store_c_tiles<G>(0, c0);
    if (a1) store_c_tiles<G>(1, c1);
}

// One pair of a run: its first group, groups, weight shift and sums ([row tile][group][256] in the task's scratch).
struct RunPair {
    int64_t g0;
    int G, shift;
    float (*c)[256];
};

constexpr int64_t kDecodeAheadMinPasses = 4;

// Block kb0 + j of pair p (G groups, its streams) decoded into block j of the buffer.
void decode_chunk_block(const RunPair& p, const PairStreams& streams, int64_t kb0, int64_t j,
                        const Fp8ScaledDecode& dec, ChunkBuffer& buffer) {
    const uint8_t* codes = streams.codes + (kb0 + j) * p.G * kFp8BlockBytes;
    if (p.G == 2)
        decode_pair_block<2, kManyRowsAhead, true>(dec, codes, BlockDeltas<2>(streams.scales, nullptr, kb0 + j, p.shift),
                                                   buffer.b[j][0]);
    else
        decode_pair_block<1, kManyRowsAhead, true>(dec, codes, BlockDeltas<1>(streams.scales, nullptr, kb0 + j, p.shift),
                                                   buffer.b[j][0]);
}

// A chunk of pair p decoded slice by slice into a buffer: slice s is chunk s % 8 (64 codes) of every group of block
// s / 8 (decode_block_chunk), the block's scaled tables made at its first slice. Why slices: vector work placed
// between two tile passes hardly overlaps the tile products, while a slice after each block's products mostly does
// (a scratch loop of the run's tile pattern, one core, TSC cycles per four products: 84-86 without vector work,
// 107-111 with 16 lookups and their stores after every pass of 8 blocks, 92-94 with 2 after every block). In the
// kernel, streamed by two threads: at n = 128-192 (4-6 passes, two blocks' slices a pass) wo_b and wo_a 0.90-0.98x
// the time, wq_b 0.93-0.97x at 192 and unchanged at 128; at n = 256 (one block a pass) all unchanged
// (docs/PERFORMANCE.md, "Forty-fourth session").
class SlicedChunkDecode {
   public:
    SlicedChunkDecode(const RunPair& p, const PairStreams& streams, int64_t kb0, const Fp8ScaledDecode& dec,
                      ChunkBuffer& buffer)
        : p_(p), streams_(streams), kb0_(kb0), dec_(dec), buffer_(buffer) {}

    // Decodes slices [done, end).
    void until(int64_t end) {
        for (; done_ < end; ++done_) {
            if (p_.G == 2) slice<2>();
            else slice<1>();
        }
    }
    int64_t done() const { return done_; }

   private:
    template <int G>
    void slice() {
        const int64_t j = done_ / 8;
        const int ch = static_cast<int>(done_ % 8);
        if (ch == 0) {
            const BlockDeltas<G> d(streams_.scales, nullptr, kb0_ + j, p_.shift);
            for (int g = 0; g < G; ++g) tables_[g] = dec_.lookup.tables<true>(d.d[g]);
        }
        decode_block_chunk<G, kManyRowsAhead, true, false, false>(
            dec_, tables_, streams_.codes + (kb0_ + j) * G * kFp8BlockBytes, ch, buffer_.b[j][0]);
    }

    const RunPair& p_;
    const PairStreams& streams_;
    int64_t kb0_;
    const Fp8ScaledDecode& dec_;
    ChunkBuffer& buffer_;
    ScaledLookup::Tables tables_[2];
    int64_t done_ = 0;
};

// The run's pairs (none wide) against every row tile of the task, chunk by chunk of k; then the sums back to the
// task's output. Steps (a chunk of k of one pair) in order; from kDecodeAheadMinPasses passes over two row tiles a
// step, each step's chunk is decoded into one of two buffers during the step before, a share in each pass (slices
// after its blocks: SlicedChunkDecode), so that the decode runs beside the tile products (streamed by two threads,
// n = 256: wq_b, wo_b, wo_a 10-17% faster; n = 64, two passes, 6-13% slower that way: the second buffer's 16 KB
// in L1), else at the start of its step.
void multiply_run(const QuantGemmTask& t, const RunPair* run, int count) {
    const int64_t kb_count = t.k / 32, tiles = (t.n + kMaxTileRows - 1) / kMaxTileRows, passes = (tiles + 1) / 2;
    const int64_t tile_words = kb_count * kTileBlockWords;  // one row tile's blocks
    const int64_t steps = (kb_count + kChunkBlocks - 1) / kChunkBlocks * count;
    Fp8ScaledDecode dec;
    ChunkBuffer buffers[2];
    auto chunk_of = [&](int64_t step) { return step / count * kChunkBlocks; };
    auto blocks_of = [&](int64_t step) { return std::min(kChunkBlocks, kb_count - chunk_of(step)); };
    const bool ahead = passes >= kDecodeAheadMinPasses;
    if (ahead) {
        const PairStreams streams(t, run[0].g0);
        for (int64_t j = 0; j < blocks_of(0); ++j) decode_chunk_block(run[0], streams, 0, j, dec, buffers[0]);
    }
    for (int64_t step = 0; step < steps; ++step) {
        const RunPair& p = run[step % count];
        const int64_t kb0 = chunk_of(step), blocks = blocks_of(step);
        if (!ahead) {
            const PairStreams streams(t, p.g0);
            for (int64_t j = 0; j < blocks; ++j) decode_chunk_block(p, streams, kb0, j, dec, buffers[0]);
        }
        const ChunkBuffer& b = buffers[ahead ? step % 2 : 0];
        const bool next = ahead && step + 1 < steps;
        const RunPair& np = run[(step + 1) % count];
        const PairStreams next_streams(t, np.g0);
        // the next step's chunk, a share of its slices in each pass, spread over the pass's blocks
        SlicedChunkDecode decode(np, next_streams, next ? chunk_of(step + 1) : 0, dec, buffers[(step + 1) % 2]);
        const int64_t slices = next ? 8 * blocks_of(step + 1) : 0, per_pass = (slices + passes - 1) / passes;
        const auto* acts = static_cast<const uint32_t*>(t.tile_acts) + kb0 * kTileBlockWords;
        for (int64_t i = 0; i < tiles; i += 2) {
            const uint32_t* a0 = acts + i * tile_words;
            const uint32_t* a1 = i + 1 < tiles ? a0 + tile_words : nullptr;
            const int64_t from = decode.done(), to = std::min(slices, from + per_pass);
            // (nothing to decode past the last step or where the step decodes its own chunk: no division per block)
            auto share = [&](int64_t j) {
                if (to > from) decode.until(from + (to - from) * (j + 1) / blocks);
            };
            if (p.G == 2) multiply_chunk<2>(a0, a1, b, blocks, kb0 == 0, p.c + 2 * i, p.c + 2 * i + 2, share);
            else multiply_chunk<1>(a0, a1, b, blocks, kb0 == 0, p.c + 2 * i, p.c + 2 * i + 2, share);
        }
    }
    for (int q = 0; q < count; ++q)
        for (int64_t i = 0; i < tiles; ++i) {
            const int m = static_cast<int>(std::min<int64_t>(t.n - i * kMaxTileRows, kMaxTileRows));
            store_scaled_back(t, run[q].c + 2 * i, run[q].G, m, i * kMaxTileRows, run[q].g0, run[q].shift, true);
        }
}

}  // namespace

// Items of kTileItemRows rows where the tiles run (each pair's chunks of k decoded once for all of them).
int64_t fp8_tile_item_rows() { return amx_enabled() ? kTileItemRows : 0; }

bool fp8_tile_acts(const void* acts, const float* act_scales, int64_t n, int64_t k, void* out, int32_t* row_shift) {
    if (!amx_enabled()) return false;
    const int64_t kb_count = k / 32;
    for (int64_t i = 0; i < n; ++i) {
        const auto* a = static_cast<const uint16_t*>(acts) + i * k;
        const float* sa = act_scales + i * kb_count;
        auto* o = static_cast<uint16_t*>(out);
        const RowExponents e = row_exponents(a, sa, kb_count);
        if (!e.ok || k >= kMaxK || (e.top >= e.bottom && e.top - e.bottom > kActSpan)) {
            row_shift[i] = kWideRow;
            zero_tile_row(o, i, kb_count);
            continue;
        }
        // top is a biased field: the largest value lies in [2^(top - 127), 2^(top - 126))
        const int shift = e.top >= e.bottom ? kActTop - (e.top - 127) : 0;
        row_shift[i] = shift;
        fold_row_scales(a, sa, kb_count, shift, o, i);
    }
    // the last row tile's rows past n: the kernel's row tiles of more than 16 rows load all 16
    for (int64_t i = n; i % kMaxTileRows != 0; ++i) zero_tile_row(static_cast<uint16_t*>(out), i, kb_count);
    return true;
}

// Pair by pair (a lone last group on its own): up to 16 rows in one PairPass, more in runs of kTileRunPairs pairs
// (multiply_run); pairs whose scales the window cannot hold, then the rows it cannot hold, by the vdpbf16ps kernel
// (gemm_fp8 without tile activations, in slices of kActRowChunk rows).
void gemm_fp8_amx(const QuantGemmTask& t) {
    const int64_t kb_count = t.k / 32;
    int configured = -1;
    PairScratch pair_scratch;
    RunPair run[kTileRunPairs];
    int in_run = 0;
    auto flush_run = [&] {
        if (in_run == 0) return;
        // (all row tiles configured with 16 rows: fp8_tile_acts zeroes the last one's rows past n)
        if (configured != 1024) configure_tile_pair(kMaxTileRows, kMaxTileRows), configured = 1024;
        multiply_run(t, run, in_run);
        in_run = 0;
    };
    for (int64_t g0 = 0; g0 < t.groups; g0 += 2) {
        const int G = g0 + 2 <= t.groups ? 2 : 1;
        const PairScaling w = pair_scaling(PairStreams(t, g0).scales, G * kb_count);
        if (w.wide) {
            gemm_pair_apart(t, g0, G, kFp8BlockBytes, 1, gemm_fp8);
            continue;
        }
        if (t.n <= kMaxTileRows) {
            const int m = static_cast<int>(t.n);
            if (m != configured) configure_pair(configured = m);
            constexpr int kFew = kMaxScaledActRows;
            if (G == 2 && m <= 2) PairPass<2, kFewRowsAhead, true>(t, pair_scratch, g0, m, w.shift).run();
            else if (G == 2 && m <= kFew) PairPass<2, kManyRowsAhead, true>(t, pair_scratch, g0, m, w.shift).run();
            else if (G == 2) PairPass<2, kManyRowsAhead, false>(t, pair_scratch, g0, m, w.shift).run();
            else if (m <= 2) PairPass<1, kFewRowsAhead, true>(t, pair_scratch, g0, m, w.shift).run();
            else if (m <= kFew) PairPass<1, kManyRowsAhead, true>(t, pair_scratch, g0, m, w.shift).run();
            else PairPass<1, kManyRowsAhead, false>(t, pair_scratch, g0, m, w.shift).run();
            store_scaled_back(t, pair_scratch.c, G, m, 0, g0, w.shift);
            continue;
        }
        // (the scratch holds the sums of kTileRunPairs pairs of up to kTileItemRows rows: 32 C tiles each)
        run[in_run] = {g0, G, w.shift, reinterpret_cast<float(*)[256]>(t.scratch) + in_run * (kTileItemRows / 8)};
        if (++in_run == kTileRunPairs) flush_run();
    }
    flush_run();
    _mm_sfence();  // (the runs' non-temporal stores: store_scaled_back)
    if (configured >= 0) _tile_release();
    gemm_wide_rows_apart(t, gemm_fp8);
}

}  // namespace deepinfer::backend::cpu::avx512
