// The MXFP4 x fp8 block-scaled GEMM (spec §4.3) on AMX tiles for 5 and more activation rows, on CPUs with AMX-BF16
// (core/cpu_features.h amx_enabled()); the fp8 x fp8 one is gemm_fp8_amx.cpp. Each 16x32 block of a row group (16
// weight rows x one 32-column scale block) is decoded to bf16 by the AVX-512 decoder (block_decode.h) into a 1 KB
// buffer laid out as the B tile of tdpbf16ps (row t = the column pair (2t, 2t + 1) of the 16 weight rows, one
// dword each: the decoder's vector order), and multiplied with up to 16 activation rows' bf16 block (the A
// tile, read in place) into a zeroed C tile: the block's partial sums of M rows x 16 weight rows. Those are
// scaled by sa * sw and accumulated over blocks in order, by the same fp32 operations as the vdpbf16ps kernels
// (gemm_quant_avx512.cpp), one bf16 rounding at the end. Up to 16 rows run in one PairPass per pair of groups,
// decoding as they stream; more in TilePairPasses of two row tiles over a panel of the pair decoded once.
//
// Numerics: products are exact (e2m1 and e4m3 values and their products fit bf16 and fp32). The results are those
// of the integer kernel that 1-4 rows take, bit for bit: a block whose partial sums are exact in fp32 has one sum
// in any order, the tiles' included; a block whose partial sums could round takes the vdpbf16ps chain here and
// there alike (Fp4Blocks). The blocks are summed one at a time here. Where the tile unit rounds once per
// tdpbf16ps, gemm_fp4_amx_sums.cpp sums over all of k instead, to the same bits, and sends this kernel only the rows
// and pairs outside its window.
//
// Why: vdpbf16ps costs ~2.3 cycles of both vector ports on Intel's cores, so 2-16 activation rows were
// compute-bound there; one tdpbf16ps does a 16x32 by 32x16 product (docs/PERFORMANCE.md, "Fourteenth session").
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/amx_tiles.h"
#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/avx512/block_decode.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// Tile registers: C (partial sums), A (activations), B (decoded weights), one set per buffer.
constexpr int kTileC = 0, kTileA = 2, kTileB = 4;

void configure_tiles(int m) {
    TileConfig c;
    for (int b = 0; b < 2; ++b) {
        c.set(kTileC + b, m, 64);
        c.set(kTileA + b, m, 64);
        c.set(kTileB + b, kBlockPairs, 64);
    }
    c.load();
}

// Units decoded ahead of the one multiplied (a whole block of a pair at a time), and the B buffers that takes.
constexpr int kDecodeAhead = 2, kBBuffers = 4;
static_assert(kBBuffers > kDecodeAhead + 1 && kDecodeAhead % 2 == 0);

// The B tiles' buffers, the C tiles' stores, the accumulators of a pair of groups (8 KB, on the stack).
struct alignas(64) AmxScratch {
    uint32_t b[kBBuffers][kBlockPairs * 16];
    float c[2][kMaxTileRows * 16];
    float acc[2][kMaxTileRows * 16];
};

// The weight format (packing.h), each block decoded into kChunks x kVectors B-tile rows.
// MXFP4: an e8m0 scale per row and block. The task's activation rows come in their integer form too
// (QuantGemmTask::fp4_row), whose flags tell, per row and block, whether every partial sum of the block's
// products is exact in fp32 (kFp4SumsExact, isa_ops.h): then the tile's sum is the exact sum, and so is the
// integer kernel's -- its planes' integer sum, or where the planes cannot hold the block, its fallback
// vdpbf16ps chain (block_decode.h fp4_block_chain; a chain without roundings). Where the flag is clear, that
// row's sums of the block are that chain here too instead of the tile's. So 5+ rows here give what 1-4 rows of
// the integer kernel give, bit for bit, and the MXFP4 results do not depend on AMX either. (The flag's wider
// bound than the planes' took most chains off the tiles' rows: a block of e4m3 activations holds 18 binades,
// the planes 11 of them, the exact sums ~16.)
struct Fp4Blocks {
    static constexpr int64_t kBlockBytes = 256, kScaleBytes = 16;  // (packing.h kFp4BlockBytes)
    static constexpr int kChunks = 4, kVectors = 4;
    Fp4ToBf16 dec;
    void decode(const uint8_t* chunk, __m512i* v) const { dec.decode(chunk, v); }
    static __m512 scale(const uint8_t* s) { return e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s))); }
};

// One group's block partial sums by the integer kernel's fallback chain (fp4_block_chain) for the rows r whose
// bit is set in `rows`: chunk c of the group's block at block + c * chunk_stride, row r's activation pairs of
// the block at a + r * a_stride, its sums to c_out + 16 r.
void chain_sums(const Fp4ToBf16& dec, const uint8_t* block, int64_t chunk_stride, const uint32_t* a,
                int64_t a_stride, uint32_t rows, float* c_out) {
    __m512i v[kBlockPairs];
    decode_fp4_block(dec, block, chunk_stride, v);
    for (; rows; rows &= rows - 1) {
        const int r = __builtin_ctz(rows);
        _mm512_store_ps(c_out + 16 * r, fp4_block_chain(v, a + r * a_stride));
    }
}
static_assert(Fp4Blocks::kChunks * Fp4Blocks::kVectors == kBlockPairs);

// The G groups of the block at `block` (pair-interleaved chunks) into the B buffers from b on, the chunks in stream
// order.
template <class Format, int G, Prefetch kAhead>
void decode_block(const Format& f, const uint8_t* block, uint32_t* b) {
#pragma GCC unroll 8
    for (int ch = 0; ch < Format::kChunks; ++ch) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            const uint8_t* chunk = block + (ch * G + g) * kPackedChunkBytes;
            __m512i v[Format::kVectors];
            f.decode(chunk, v);
            prefetch_ahead<kAhead>(chunk, v[0]);
            uint32_t* bg = b + g * (kBlockPairs * 16);
#pragma GCC unroll 4
            for (int q = 0; q < Format::kVectors; ++q)
                _mm512_store_si512(bg + (Format::kVectors * ch + q) * 16, v[q]);
        }
    }
}

// N consecutive blocks' partial sums of m rows (c[j], 16 weight rows each) scaled by sw[j] * sa (row r's activation
// scale of block j at sa[r * sa_stride + j]) onto the accumulators, block after block. Each accumulator row is
// loaded and stored once for all N.
template <int N>
inline void add_scaled_sums_n(float* const* c, float* acc, int m, const __m512* sw_in, const float* sa,
                              int64_t sa_stride) {
    __m512 sw[N];
    for (int j = 0; j < N; ++j) {
        sw[j] = sw_in[j];
        // sw as an opaque vector: one vmulps with the row's scale broadcast from memory. Seen as a broadcast, GCC
        // multiplied the scalars and broadcast the product (vmulss + a vbroadcastss shuffle per row).
        __asm__("" : "+" DEEPINFER_ZMM(sw[j]));
    }
    for (int r = 0; r < m; ++r) {
        __m512 a = _mm512_load_ps(acc + r * 16);
        for (int j = 0; j < N; ++j) {
            const __m512 sum = _mm512_load_ps(c[j] + r * 16);
            a = _mm512_fmadd_ps(sum, _mm512_mul_ps(sw[j], _mm512_set1_ps(sa[r * sa_stride + j])), a);
        }
        _mm512_store_ps(acc + r * 16, a);
    }
}

// One block's (N = 1).
inline void add_scaled_sums(float* c, float* acc, int m, __m512 sw, const float* sa, int64_t sa_stride) {
    add_scaled_sums_n<1>(&c, acc, m, &sw, sa, sa_stride);
}

// One pass of M (<= 16) activation rows over the G groups of a pair, the pair's blocks in stream order: unit
// u = block u / G of group u % G, whose codes and scales are the pair's u-th (packing.h: a
// pair's blocks hold the groups' pieces alternately). Four units are in flight (step): unit u + 2 is decoded
// into its B buffer while unit u is multiplied, u - 1's partial sums stored and u - 2's scaled. What the n = 1
// speed turned on (one core): a tileloadd of a buffer just stored waits for the stores to complete (loaded
// right after its decode, the B tile took half the time in cache); G a constant (a division by it per unit
// cost a quarter); and the pair's two groups decoded together, their chunks in stream order (one group's
// chunks at a time, every other 64-byte line, streamed at 86% of one core's bandwidth instead of 94-98%).
template <class Format, int G, Prefetch kAhead>
class PairPass {
   public:
    PairPass(const QuantGemmTask& t, AmxScratch& s, int64_t g0, int64_t i0, int m, const uint16_t* inexact)
        : t_(t), s_(s), m_(m), kb_count_(t.k / 32), a_stride_(t.k * 2), inexact_(inexact) {
        codes_ = t.codes + packed_group(g0, t.groups, kb_count_, Format::kBlockBytes, kPackedChunkBytes).offset;
        scales_ = t.scales + packed_scale_offset(g0, t.groups, 0, kb_count_, Format::kScaleBytes);
        acts_ = static_cast<const uint32_t*>(t.acts) + i0 * (t.k / 2);
        sa_ = t.act_scales + i0 * kb_count_;
    }

    void run() {
        for (int g = 0; g < G; ++g)
            for (int r = 0; r < m_; ++r) _mm512_store_ps(s_.acc[g] + r * 16, _mm512_setzero_ps());
        const int64_t units = kb_count_ * G;
        for (int64_t u = 0; u < kDecodeAhead && u < units; u += G) decode(u);
        int64_t u = 0;
        for (; u + 1 < units; u += 2) {
            step<0>(u, units);
            step<1>(u + 1, units);
        }
        if (u < units) {
            step<0>(u, units);
            store_sums<0>(u);
        } else {
            store_sums<1>(units - 1);
        }
        if (units >= 2) accumulate(units - 2);
        accumulate(units - 1);
    }

   private:
    // Decode the units of block u / G (u its first) into their B buffers, the pair's chunks in stream order.
    void decode(int64_t u) {
        const uint8_t* block = codes_ + (u / G) * (G * Format::kBlockBytes);
        // (u's buffer, then u + 1's: u is even where G = 2)
        decode_block<Format, G, kAhead>(format_, block, s_.b[u % kBBuffers]);
    }

    // Unit u's stage of each unit in flight: decode u + kDecodeAhead (with its block's other unit), multiply u
    // (C tile kTile), store the partial sums of u - 1 (the other tile) and scale those of u - 2. (Reading the
    // sums back one step after their tilestored rather than at once measured the same.)
    template <int kTile>
    void step(int64_t u, int64_t units) {
        if (u + kDecodeAhead < units && (u + kDecodeAhead) % G == 0) decode(u + kDecodeAhead);
        multiply<kTile>(u);
        if (u >= 1) store_sums<1 - kTile>(u - 1);
        if (u >= 2) accumulate(u - 2);
    }

    // Multiply decoded unit u with the activations' block into C tile kTile.
    template <int kTile>
    void multiply(int64_t u) {
        const uint32_t* a = acts_ + (u / G) * 16;
        const uint32_t* b = s_.b[u % kBBuffers];
        const int64_t a_stride = a_stride_;
        // (GCC's tile intrinsics take the register numbers as literals)
#define DEEPINFER_AMX_BLOCK(C, A, B) \
    _tile_loadd(B, b, 64);           \
    _tile_loadd(A, a, a_stride);     \
    _tile_zero(C);                   \
    _tile_dpbf16ps(C, A, B)
        static_assert(kTileC == 0 && kTileA == 2 && kTileB == 4);
        if constexpr (kTile == 0) {
            DEEPINFER_AMX_BLOCK(0, 2, 4);
        } else {
            DEEPINFER_AMX_BLOCK(1, 3, 5);
        }
#undef DEEPINFER_AMX_BLOCK
    }

    // Store C tile kTile (unit u's partial sums) to unit u's sums buffer.
    template <int kTile>
    void store_sums(int64_t u) {
        if constexpr (kTile == 0) _tile_stored(0, s_.c[u % 2], 64);
        else _tile_stored(1, s_.c[u % 2], 64);
    }

    // Scale unit u's partial sums and add them to its group's accumulators.
    void accumulate(int64_t u) {
        const int64_t kb = u / G;
        const __m512 sw = Format::scale(scales_ + u * Format::kScaleBytes);
        float* acc = s_.acc[u % G];
        float* c = s_.c[u % 2];
        const uint32_t inexact = inexact_[kb];
        if (inexact)
            chain_sums(format_.dec, codes_ + kb * (G * Format::kBlockBytes) + (u % G) * kPackedChunkBytes,
                       G * kPackedChunkBytes, acts_ + kb * 16, t_.k / 2, inexact, c);
        add_scaled_sums(c, acc, m_, sw, sa_ + kb, kb_count_);
    }

    const QuantGemmTask& t_;
    AmxScratch& s_;
    int m_;
    int64_t kb_count_, a_stride_;
    const uint8_t *codes_, *scales_;
    const uint32_t* acts_;
    const float* sa_;
    const uint16_t* inexact_;  // the tile's masks of inexact rows by block (inexact_rows)
    Format format_;
};


// Two row tiles (m0 and m1 <= 16 rows; m1 = 0: one) against the G groups of a pair, block by block: per block
// each tile register is loaded once and serves two products -- a tile's A with both groups' B, a group's B with
// both tiles' A -- against one load per product in PairPass. In a task of many rows those loads come from L2 (its
// activations, the panel): a scratch loop on the Intel Xeon took ~15 TSC cycles per 1 KB tile from L2, ~6 from L1,
// ~12 per tdpbf16ps. fp8 in cache, n = 64: 412-434 -> 457-464 GFLOP/s against PairPass over the panel (MXFP4
// 219-236 -> 247). Tried there, no gain: 4 C tiles in flight instead of 2, the sums read back a block later. What
// remains large is the scaling of the sums (~27% of the time: n = 64 ran 37% faster without it, wrong results).
// Tiles: C of (row tile i, group g) at 2 i + g, A of tile i at 4 + i, B of group g at 6 + g. Block kb's C tiles
// are stored at kb + 1, before its products; every kAccBlocks blocks are scaled together after the products
// of the next block, so each accumulator row is read and written once for them (fp8 n = 64 in cache
// 514 -> 557 GFLOP/s, medians of 5 alternating runs; 4 blocks measured as 2. In PairPass, where the sums are
// scaled a unit at a time between the products, sets of 2 blocks made n = 4-16 ~10% slower).
//
// The B tiles come from the task's panel (t.scratch: 2 KB a block, <= 512 KB at k = 8 k, in L2): the pass of
// the first two tiles decodes the pair into it, the others read it (a block decoded once per task, not once per
// 16 rows: fp8 n = 64 in cache 390-397 -> 487-532 GFLOP/s with PairPass, when this kernel served fp8 too).
constexpr int kAccBlocks = 2;
struct TilePairScratch {
    float c[kAccBlocks][2][2][kMaxTileRows * 16];  // [block mod kAccBlocks][row tile][group] a block's partial sums
    float acc[2][2][kMaxTileRows * 16];  // [row tile][group]
};

template <class Format, int G>
class TilePairPass {
   public:
    TilePairPass(const QuantGemmTask& t, TilePairScratch& s, int64_t g0, int64_t i0, int m0, int m1, bool decode,
                 const uint16_t* inexact)
        : t_(t), s_(s), kb_count_(t.k / 32), a_stride_(t.k * 2), m_{m0, m1}, decode_(decode) {
        codes_ = t.codes + packed_group(g0, t.groups, kb_count_, Format::kBlockBytes, kPackedChunkBytes).offset;
        scales_ = t.scales + packed_scale_offset(g0, t.groups, 0, kb_count_, Format::kScaleBytes);
        panel_ = reinterpret_cast<uint32_t*>(t.scratch);
        for (int i = 0; i < 2; ++i) {
            const int64_t row = i0 + i * kMaxTileRows;
            acts_[i] = static_cast<const uint32_t*>(t.acts) + row * (t.k / 2);
            sa_[i] = t.act_scales + row * kb_count_;
            inexact_[i] = inexact ? inexact + (row / kMaxTileRows) * kb_count_ : nullptr;
        }
    }

    void run() {
        for (int i = 0; i < 2; ++i)
            for (int g = 0; g < G; ++g)
                for (int r = 0; r < m_[i]; ++r) _mm512_store_ps(s_.acc[i][g] + r * 16, _mm512_setzero_ps());
        if (decode_) decode(0);
        for (int64_t kb = 0; kb < kb_count_; ++kb) {
            if (decode_ && kb + 1 < kb_count_) decode(kb + 1);
            if (kb > 0) store_sums(kb - 1);
            multiply(kb);
            if (kb >= kAccBlocks && kb % kAccBlocks == 0) accumulate<kAccBlocks>(kb - kAccBlocks);
        }
        store_sums(kb_count_ - 1);
        // the blocks after the last set scaled in the loop
        int64_t kb = (kb_count_ - 1) / kAccBlocks * kAccBlocks;
        if (kb_count_ - kb == kAccBlocks) accumulate<kAccBlocks>(kb);
        else
            for (; kb < kb_count_; ++kb) accumulate<1>(kb);
    }

   private:
    uint32_t* buffer(int64_t kb, int g) const { return panel_ + (kb * G + g) * (kBlockPairs * 16); }

    void decode(int64_t kb) {
        const uint8_t* block = codes_ + kb * (G * Format::kBlockBytes);
        decode_block<Format, G, kManyRowsAhead>(format_, block, buffer(kb, 0));
    }

    void multiply(int64_t kb) {
        const uint32_t* a0 = acts_[0] + kb * 16;
        const uint32_t* a1 = acts_[1] + kb * 16;
        const int64_t a_stride = a_stride_;
        _tile_loadd(6, buffer(kb, 0), 64);
        if constexpr (G == 2) _tile_loadd(7, buffer(kb, 1), 64);
        _tile_loadd(4, a0, a_stride);
        _tile_zero(0);
        _tile_dpbf16ps(0, 4, 6);
        if constexpr (G == 2) {
            _tile_zero(1);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (m_[1] > 0) {
            _tile_loadd(5, a1, a_stride);
            _tile_zero(2);
            _tile_dpbf16ps(2, 5, 6);
            if constexpr (G == 2) {
                _tile_zero(3);
                _tile_dpbf16ps(3, 5, 7);
            }
        }
    }

    // Block kb's C tiles to its sums buffers.
    void store_sums(int64_t kb) {
        float(*c)[2][kMaxTileRows * 16] = s_.c[kb % kAccBlocks];
        _tile_stored(0, c[0][0], 64);
        if constexpr (G == 2) _tile_stored(1, c[0][1], 64);
        if (m_[1] > 0) {
            _tile_stored(2, c[1][0], 64);
            if constexpr (G == 2) _tile_stored(3, c[1][1], 64);
        }
    }

    // Blocks kb .. kb + N - 1 onto the accumulators (a row's block that is not exact by the integer kernel's chain
    // instead).
    template <int N>
    void accumulate(int64_t kb) {
        for (int g = 0; g < G; ++g) {
            __m512 sw[N];
            for (int j = 0; j < N; ++j) sw[j] = Format::scale(scales_ + ((kb + j) * G + g) * Format::kScaleBytes);
            for (int i = 0; i < 2 && m_[i] > 0; ++i) {
                float* c[N];
                for (int j = 0; j < N; ++j) {
                    c[j] = s_.c[(kb + j) % kAccBlocks][i][g];
                    const uint32_t inexact = inexact_[i][kb + j];
                    if (inexact)
                        chain_sums(format_.dec, codes_ + (kb + j) * (G * Format::kBlockBytes) + g * kPackedChunkBytes,
                                   G * kPackedChunkBytes, acts_[i] + (kb + j) * 16, t_.k / 2, inexact, c[j]);
                }
                add_scaled_sums_n<N>(c, s_.acc[i][g], m_[i], sw, sa_[i] + kb, kb_count_);
            }
        }
    }

    const QuantGemmTask& t_;
    TilePairScratch& s_;
    int64_t kb_count_, a_stride_;
    int m_[2];
    bool decode_;
    const uint8_t *codes_, *scales_;
    uint32_t* panel_;
    const uint32_t* acts_[2];
    const float* sa_[2];
    const uint16_t* inexact_[2];  // the tiles' masks of inexact rows by block (inexact_rows)
    Format format_;
};


// More than 16 rows: pair by pair, each pair against every two tiles of 16 rows (TilePairPass).
template <class Format>
void gemm_amx_tile_pairs(const QuantGemmTask& t, const uint16_t* inexact) {
    // the panel's bytes per column of k, and the masks (gemm_amx: 4 tiles x 2 bytes per 32 columns), within
    // the 24 floats per column of gemm_scratch_floats(k) (isa_ops.h)
    static_assert(2 * kBlockPairs * 16 * sizeof(uint32_t) / 32 + 1 <= 24 * sizeof(float));
    TilePairScratch scratch;
    int configured = -1;
    for (int64_t g0 = 0; g0 < t.groups; g0 += 2) {
        const int G = g0 + 2 <= t.groups ? 2 : 1;
        for (int64_t i0 = 0; i0 < t.n; i0 += 2 * kMaxTileRows) {
            const int64_t left = t.n - i0;
            const int m0 = static_cast<int>(left < kMaxTileRows ? left : kMaxTileRows);
            const int m1 = static_cast<int>(left - m0 < kMaxTileRows ? left - m0 : kMaxTileRows);
            if (m0 * 32 + m1 != configured) configure_tile_pair(m0, m1), configured = m0 * 32 + m1;
            if (G == 2) TilePairPass<Format, 2>(t, scratch, g0, i0, m0, m1, i0 == 0, inexact).run();
            else TilePairPass<Format, 1>(t, scratch, g0, i0, m0, m1, i0 == 0, inexact).run();
            for (int i = 0; i < 2; ++i)
                for (int g = 0; g < G; ++g)
                    store_rows(t, scratch.acc[i][g], i ? m1 : m0, i0 + i * kMaxTileRows, g0 + g);
        }
    }
    _tile_release();
}

}  // namespace

// Pair by pair (a lone last group on its own), each pair against the task's (5-16) activation rows in one
// PairPass; more rows in TilePairPasses.
void gemm_fp4_amx(const QuantGemmTask& t) {
    using Format = Fp4Blocks;
    // the masks after the panel in the scratch (2 bytes per tile and block: within its 24 floats per column)
    uint16_t* inexact = reinterpret_cast<uint16_t*>(t.scratch + 16 * t.k);
    inexact_rows(t, inexact);
    if (t.n > kMaxTileRows) {
        gemm_amx_tile_pairs<Format>(t, inexact);
        return;
    }
    AmxScratch scratch;
    int configured = 0;
    for (int64_t g0 = 0; g0 < t.groups; g0 += 2) {
        const int G = g0 + 2 <= t.groups ? 2 : 1;
        {
            const int64_t i0 = 0;
            const int m = static_cast<int>(t.n);
            if (m != configured) configure_tiles(configured = m);
            if (G == 2) PairPass<Format, 2, kManyRowsAhead>(t, scratch, g0, i0, m, inexact).run();
            else PairPass<Format, 1, kManyRowsAhead>(t, scratch, g0, i0, m, inexact).run();
            for (int g = 0; g < G; ++g) store_rows(t, scratch.acc[g], m, i0, g0 + g);
        }
    }
    _tile_release();
}

}  // namespace deepinfer::backend::cpu::avx512
