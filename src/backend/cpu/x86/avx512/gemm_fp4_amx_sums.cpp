// The MXFP4 x fp8 block-scaled GEMM (spec §4.3) of 5 and more activation rows on AMX tiles, with each row's sums
// over all of k in one C tile -- where the tile unit was seen to add a tdpbf16ps's products to C with one rounding
// (tile_unit_rounds_once below) and the operands lie in the window. Otherwise gemm_amx.cpp's kernel runs, which
// sums per block.
//
// Numerics: the result must be the integer kernel's (1-4 rows, gemm_quant_avx512.cpp) bit for bit, so that a row's
// result does not depend on its batch. That kernel sums each block exactly (or, for a row's block without
// kFp4SumsExact, by the vdpbf16ps chain fp4_block_chain), scales the sum p by sw * sa and accumulates the blocks in
// order: acc = fma(p, sw sa, acc). Here the operands enter the tiles with their scales folded in, exact in bf16:
// each activation a * sa (fp4_tile_acts) and each weight w * sw (at its decode). Every nonzero operand lies in
// [2^-60, 2^50), so every product is exact, at least 2^-120 with at most 6 significant bits (e4m3 x e2m1): a
// multiple of 2^-125, as is every sum of them -- no sum falls below fp32's normal range, here or in the integer
// kernel, and none nears overflow (k < 2^20). A block whose partial sums are exact (kFp4SumsExact) then sums in
// the tile to p sw sa exactly, in any order, and the unit adds it to C with one rounding: C = RNE(C + p sw sa),
// which is fma(p, sw sa, C). A row's block without the flag: its row of the A tile is zero for that block
// (fp4_tile_acts) and the chain's sum is put into the stored C tile by the integer kernel's fma, in block order. So
// every row gets the integer kernel's operations on the same values.
//
// The one rounding per tdpbf16ps is the unit's behaviour, not its specification (the SDM's pseudo-code sums pair
// by pair), so it is checked once per process on crafted products before any task takes this kernel; a CPU that
// rounds otherwise keeps the per-block kernel. Rows and pairs outside the window take the per-block kernel too
// (gemm_wide_rows_apart, gemm_pair_apart), whose results are the same bits.
//
// Why: summing per block stores, zeroes and scales a C tile per block, a chain of tile operations per C tile that
// left the tiles' products waiting (n = 64 streamed: w1 / w2 1.3-1.45x faster summed over k; docs/PERFORMANCE.md,
// "Eighteenth session").
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/avx512/amx_tiles.h"
#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/avx512/block_decode.h"
#include "backend/cpu/x86/isa_ops.h"
#include "core/check.h"
#include "core/cpu_features.h"
#include "core/scratch_pool.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// The window, as biased exponents: every nonzero |a sa| in [2^(kLowest - 127), 2^(kTop - 126)), every |w sw| too
// (|w| in [0.5, 6]: scale codes kScaleLo..kScaleHi).
constexpr int kLowest = 127 - 60, kTop = 127 + 49;
constexpr int kScaleLo = kLowest + 1, kScaleHi = kTop - 2;
constexpr int64_t kMaxK = int64_t{1} << 20;
constexpr int64_t kFp4BlockBytes = 256, kFp4ScaleBytes = 16;  // a group's 16 x 32 codes and scales (packing.h)

// Whether tdpbf16ps gives RNE(C + S) for products whose every partial sum S is exact: 64 tiles of random exact
// products (e4m3-like times e2m1-like values, some pairs cancelling to 2^11) against random C values whose last
// place lies among the products' bits, against the sum in double (exact there) rounded once to fp32.
bool probe_tile_rounding() {
    uint64_t state = 0x2545f4914f6cdd1dULL;
    auto next = [&](int bound) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<int>((state >> 33) % static_cast<uint64_t>(bound));
    };
    auto bf16_bits = [](float v) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        return static_cast<uint16_t>(u >> 16);  // (exact: at most 8 significant bits)
    };
    static constexpr float kE2m1[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    TileConfig config;
    for (int tile = 0; tile < 3; ++tile) config.set(tile, 16, 64);
    config.load();
    bool same = true;
    for (int trial = 0; trial < 64 && same; ++trial) {
        alignas(64) float av[16][32], bv[32][16], c[16][16], out[16][16];
        alignas(64) uint16_t a[16][32], b[16][32];  // A rows; B row t = column pair (2t, 2t + 1) of 16 columns
        for (int r = 0; r < 16; ++r)
            for (int j = 0; j < 32; ++j)
                av[r][j] = (next(8) == 0 ? 0.0f : std::ldexp(1.0f + next(8) / 8.0f, next(7) - 3)) * (next(2) ? -1 : 1);
        for (int j = 0; j < 32; ++j)
            for (int n = 0; n < 16; ++n) bv[j][n] = std::ldexp(kE2m1[next(8)], next(5) - 2) * (next(2) ? -1 : 1);
        if (trial % 2) {  // two products of 2^11 that cancel
            for (int r = 0; r < 16; ++r) av[r][3] = 64.0f, av[r][20] = -64.0f;
            for (int n = 0; n < 16; ++n) bv[3][n] = bv[20][n] = 32.0f;
        }
        for (int r = 0; r < 16; ++r)
            for (int j = 0; j < 32; ++j) a[r][j] = bf16_bits(av[r][j]);
        for (int j = 0; j < 32; ++j)
            for (int n = 0; n < 16; ++n) b[j / 2][2 * n + j % 2] = bf16_bits(bv[j][n]);
        for (int r = 0; r < 16; ++r)
            for (int n = 0; n < 16; ++n) {
                const int kind = next(8);
                c[r][n] = kind == 0 ? 0.0f
                                    : std::ldexp(static_cast<float>((1 << 23) + next(1 << 23)), next(9) - 15) *
                                          (kind < 4 ? -1 : 1);
            }
        _tile_loadd(0, c, 64);
        _tile_loadd(1, a, 64);
        _tile_loadd(2, b, 64);
        _tile_dpbf16ps(0, 1, 2);
        _tile_stored(0, out, 64);
        for (int r = 0; r < 16; ++r)
            for (int n = 0; n < 16; ++n) {
                double s = c[r][n];
                for (int j = 0; j < 32; ++j) s += static_cast<double>(av[r][j]) * bv[j][n];
                const float want = static_cast<float>(s);
                same &= std::memcmp(&want, &out[r][n], 4) == 0;
            }
    }
    _tile_release();
    return same;
}


// Block kb of a pair (G groups, packing.h) decoded with each weight row's scale folded in: group g's B tile at
// b + g * 256 holds w * sw, the scale's exponent added to every nonzero bf16 (one masked add per vector; the window
// keeps every exponent in range).
template <int G, Prefetch kAhead>
void decode_scaled_block(const Fp4ToBf16& dec, const uint8_t* block, const uint8_t* scales, uint32_t* b) {
    const __m512i exponent = _mm512_set1_epi16(0x7f80);
    __m512i offset[G];
    for (int g = 0; g < G; ++g) {
        // dword lane n: weight row n's (code - 127) << 7 in both words
        const __m512i d = _mm512_slli_epi32(
            _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                 scales + g * kFp4ScaleBytes))),
                             _mm512_set1_epi32(127)),
            7);
        offset[g] = _mm512_or_si512(_mm512_and_si512(d, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(d, 16));
    }
#pragma GCC unroll 4
    for (int ch = 0; ch < 4; ++ch) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            const uint8_t* chunk = block + (ch * G + g) * kPackedChunkBytes;
            __m512i v[4];
            dec.decode(chunk, v);
            prefetch_ahead<kAhead>(chunk, v[0]);
            uint32_t* bg = b + g * (kBlockPairs * 16);
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q)
                _mm512_store_si512(bg + (4 * ch + q) * 16,
                                   _mm512_mask_add_epi16(v[q], _mm512_test_epi16_mask(v[q], exponent), v[q],
                                                         offset[g]));
        }
    }
}

// A pair's codes and scales, as the passes stream them.
struct PairCodes {
    const uint8_t *codes, *scales;
    PairCodes(const QuantGemmTask& t, int64_t g0) {
        const int64_t kb_count = t.k / 32;
        codes = t.codes + packed_group(g0, t.groups, kb_count, kFp4BlockBytes, kPackedChunkBytes).offset;
        scales = t.scales + packed_scale_offset(g0, t.groups, 0, kb_count, kFp4ScaleBytes);
    }
};

// The activations of the row tile from `row` (16 rows): tile-blocked (fp4_tile_acts), as values and scales (for the
// chains), and its masks of inexact rows by block (inexact_rows).
struct RowTile {
    const uint16_t* tile_acts = nullptr;
    const uint32_t* acts = nullptr;
    const float* sa = nullptr;
    const uint16_t* inexact = nullptr;
    RowTile() = default;
    RowTile(const QuantGemmTask& t, int64_t row, const uint16_t* inexact_masks) {
        const int64_t kb_count = t.k / 32;
        tile_acts = static_cast<const uint16_t*>(t.tile_acts) + tile_acts_at(row, 0, kb_count);
        acts = static_cast<const uint32_t*>(t.acts) + row * (t.k / 2);
        sa = t.act_scales + row * kb_count;
        inexact = inexact_masks + row / kMaxTileRows * kb_count;
    }
};

// Block kb of row tile r, whose rows in `mask` lack kFp4SumsExact, before its products: the tile's C registers (i of
// configure_tile_pair) stored to c[g], those rows' sums given the integer kernel's fma of the chain's sums
// (gemm_int_rows: p * (sw * sa) + acc), and C loaded back. Their A rows of the block are zero (fp4_tile_acts), so
// the tile adds nothing to them.
//
// The chains run on the block's B tiles at b (group g's at b + g * 256: w * sw, decode_scaled_block) rather than on
// w decoded again, the G groups' chains side by side. sw is a power of two and the window keeps every operand, and
// so every product and partial sum of the chain, normal and finite (products of |a| >= 2^-9 and |w sw| >= 2^-60;
// sums below 2^70): scaling every product by sw scales each of the chain's roundings exactly, so its sums are
// p * sw, and fma(p sw, sa, acc) is the integer kernel's fma(p, sw * sa, acc). Why: the 16 dependent vdpbf16ps of a
// chain were ~60% of this function's samples, and it 5.4% of a 2048-token prefill's of the released dims (perf);
// with the chains side by side and no second decode, 4.2%.
template <int G>
void fold_chains(int i, const uint32_t* b, const RowTile& r, int64_t k, int64_t kb, uint16_t mask,
                 float (*c)[256]) {
    store_c_tiles<G>(i, c);
    const int64_t kb_count = k / 32;
    for (uint32_t left = mask; left; left &= left - 1) {
        const int row = __builtin_ctz(left);
        const uint32_t* a = r.acts + row * (k / 2) + kb * 16;
        __m512 p[G];
        for (int g = 0; g < G; ++g) p[g] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int tp = 0; tp < kBlockPairs; ++tp)
            for (int g = 0; g < G; ++g) p[g] = dot_bcast(p[g], _mm512_load_si512(b + g * 256 + tp * 16), a + tp);
        const __m512 sa = _mm512_set1_ps(r.sa[row * kb_count + kb]);
        for (int g = 0; g < G; ++g) {
            float* cr = c[g] + 16 * row;
            _mm512_store_ps(cr, _mm512_fmadd_ps(p[g], sa, _mm512_load_ps(cr)));
        }
    }
    load_c_tiles<G>(i, c);
}

// Block kb's products of row tile r0 (C tile registers 0-1, A 4) and, where r1, of r1 (C 2-3, A 5) against the
// pair's B tiles at b (6, 7; configure_tile_pair). A row tile whose block has inexact rows first gets their chains
// folded into its sums: chains(i, mask, b) (fold_chains; the A rows of those blocks are zero).
template <int G, class Chains>
inline void multiply_block(const uint32_t* b, const RowTile& r0, const RowTile* r1, int64_t kb, Chains&& chains) {
    _tile_loadd(6, b, 64);
    if constexpr (G == 2) _tile_loadd(7, b + kBlockPairs * 16, 64);
    const uint16_t mask0 = r0.inexact[kb];
    if (mask0) chains(0, mask0, b);
    _tile_loadd(4, r0.tile_acts + kb * kTileBlockElems, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (G == 2) _tile_dpbf16ps(1, 4, 7);
    if (!r1) return;
    const uint16_t mask1 = r1->inexact[kb];
    if (mask1) chains(1, mask1, b);
    _tile_loadd(5, r1->tile_acts + kb * kTileBlockElems, 64);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (G == 2) _tile_dpbf16ps(3, 5, 7);
}

// Up to 32 rows: two row tiles (m0 and m1 <= 16 rows; m1 = 0: one) against a pair's G groups in one pass over k,
// block by block, each block decoded one ahead of its products into a ring of kRingBlocks blocks in L1.
constexpr int kRingBlocks = 4;
struct alignas(64) SumsScratch {
    float c[2][2][kMaxTileRows * 16];  // [row tile][group]: the C tiles stored, the sums when run
    uint32_t ring[kRingBlocks][2][kBlockPairs * 16];
};

template <int G>
class SumsPass {
   public:
    SumsPass(const QuantGemmTask& t, SumsScratch& s, int64_t g0, int m0, int m1, const uint16_t* inexact)
        : t_(t), s_(s), kb_count_(t.k / 32), m_{m0, m1}, pair_(t, g0) {
        for (int i = 0; i < (m1 > 0 ? 2 : 1); ++i) rows_[i] = RowTile(t, i * kMaxTileRows, inexact);
    }

    void run() {
        const int tiles = m_[1] > 0 ? 2 : 1;
        for (int i = 0; i < tiles; ++i) zero_c_tiles<G>(i);
        decode(0);
        for (int64_t kb = 0; kb < kb_count_; ++kb) {
            if (kb + 1 < kb_count_) decode(kb + 1);
            multiply_block<G>(s_.ring[kb % kRingBlocks][0], rows_[0], m_[1] > 0 ? &rows_[1] : nullptr, kb,
                              [&](int i, uint16_t mask, const uint32_t* b) {
                                  fold_chains<G>(i, b, rows_[i], t_.k, kb, mask, s_.c[i]);
                              });
        }
        for (int i = 0; i < tiles; ++i) store_c_tiles<G>(i, s_.c[i]);
    }

   private:
    void decode(int64_t kb) {
        decode_scaled_block<G, kManyRowsAhead>(dec_, pair_.codes + kb * G * kFp4BlockBytes,
                                               pair_.scales + kb * G * kFp4ScaleBytes, s_.ring[kb % kRingBlocks][0]);
    }

    const QuantGemmTask& t_;
    SumsScratch& s_;
    int64_t kb_count_;
    int m_[2];
    PairCodes pair_;
    RowTile rows_[2];
    Fp4ToBf16 dec_;
};

// 33-64 rows (three or four row tiles): k in chunks of kChunkBlocks blocks; each chunk of the pair is decoded once
// into L1 and multiplied by the row tiles two at a time, their C tiles waiting in the scratch between chunks (stored
// and loaded whole, so the sums are SumsPass's, block by block in order). Every row tile is configured with 16 rows:
// fp4_tile_acts zeroes the last one's rows past n (their sums are never stored; left as the buffer held them, the
// pass ran 10-15% slower in cache at n = 33-40: the tile unit runs faster on a half of A that is zero). Why: one
// pass over all of k per two row tiles wrote the decoded pair to a panel in L2 and read it back there for the next
// two, as the fp8 kernel did before its chunks (gemm_fp8_amx.cpp, multiply_run).
constexpr int64_t kChunkBlocks = 8;
constexpr int kChunkTiles = 4;
static_assert(kChunkTiles * kMaxTileRows == kActRowChunk, "an MXFP4 task's rows fit the chunked pass");
struct alignas(64) ChunkScratch {
    float c[kChunkTiles][2][kMaxTileRows * 16];     // [row tile][group]: the C tiles stored, the sums when run
    uint32_t b[kChunkBlocks][2][kBlockPairs * 16];  // the chunk's B tiles, [block][group]
};

template <int G>
class ChunkedSumsPass {
   public:
    ChunkedSumsPass(const QuantGemmTask& t, ChunkScratch& s, int64_t g0, const uint16_t* inexact)
        : t_(t), s_(s), kb_count_(t.k / 32), tiles_(static_cast<int>((t.n + kMaxTileRows - 1) / kMaxTileRows)),
          pair_(t, g0) {
        for (int i = 0; i < tiles_; ++i) rows_[i] = RowTile(t, i * kMaxTileRows, inexact);
    }

    void run() {
        for (int64_t kb0 = 0; kb0 < kb_count_; kb0 += kChunkBlocks) {
            const int64_t blocks = std::min(kChunkBlocks, kb_count_ - kb0);
            for (int64_t j = 0; j < blocks; ++j)
                decode_scaled_block<G, kManyRowsAhead>(dec_, pair_.codes + (kb0 + j) * G * kFp4BlockBytes,
                                                       pair_.scales + (kb0 + j) * G * kFp4ScaleBytes, s_.b[j][0]);
            for (int p = 0; p < tiles_; p += 2) multiply_chunk(p, p + 1 < tiles_, kb0, blocks);
        }
    }

   private:
    // Row tiles p and (two) p + 1 against the chunk.
    void multiply_chunk(int p, bool two, int64_t kb0, int64_t blocks) {
        if (kb0 == 0) {
            zero_c_tiles<G>(0);
            if (two) zero_c_tiles<G>(1);
        } else {
            load_c_tiles<G>(0, s_.c[p]);
            if (two) load_c_tiles<G>(1, s_.c[p + 1]);
        }
        for (int64_t j = 0; j < blocks; ++j) {
            const int64_t kb = kb0 + j;
            multiply_block<G>(s_.b[j][0], rows_[p], two ? &rows_[p + 1] : nullptr, kb,
                              [&](int i, uint16_t mask, const uint32_t* b) {
                                  fold_chains<G>(i, b, rows_[p + i], t_.k, kb, mask, s_.c[p + i]);
                              });
        }
        store_c_tiles<G>(0, s_.c[p]);
        if (two) store_c_tiles<G>(1, s_.c[p + 1]);
    }

    const QuantGemmTask& t_;
    ChunkScratch& s_;
    int64_t kb_count_;
    int tiles_;
    PairCodes pair_;
    RowTile rows_[kChunkTiles];
    Fp4ToBf16 dec_;
};

}  // namespace

bool tile_unit_rounds_once() {
    static const bool once = probe_tile_rounding();
    return once;
}

bool fp4_tile_acts(const void* acts, const float* act_scales, const uint8_t* fp4_rows, int64_t row_bytes, int64_t n,
                   int64_t k, void* out, int32_t* row_shift) {
    // (1-4 rows take the integer kernel: gemm_fp4)
    if (n <= kFp4IntegerMaxRows || k >= kMaxK || !amx_enabled() || !tile_unit_rounds_once()) return false;
    const int64_t kb_count = k / 32, exact_at = fp4_row_layout(kb_count).exact;
    for (int64_t i = 0; i < n; ++i) {
        const auto* a = static_cast<const uint16_t*>(acts) + i * k;
        const float* sa = act_scales + i * kb_count;
        auto* o = static_cast<uint16_t*>(out);
        const RowExponents e = row_exponents(a, sa, kb_count);
        if (!e.ok || (e.top >= e.bottom && (e.top > kTop || e.bottom < kLowest))) {
            row_shift[i] = kWideRow;
            zero_tile_row(o, i, kb_count);
            continue;
        }
        row_shift[i] = 0;
        fold_row_scales(a, sa, kb_count, 0, o, i);
        // the blocks the chains sum (fold_chains): the tiles add nothing for them
        const uint8_t* exact = fp4_rows + i * row_bytes + exact_at;
        for (int64_t kb = 0; kb < kb_count; ++kb)
            if ((exact[kb] & kFp4SumsExact) == 0)
                _mm512_store_si512(o + tile_acts_at(i, kb, kb_count), _mm512_setzero_si512());
    }
    // the last row tile's rows past n: ChunkedSumsPass's row tiles load all 16
    for (int64_t i = n; i % kMaxTileRows != 0; ++i) zero_tile_row(static_cast<uint16_t*>(out), i, kb_count);
    return true;
}

// Pair by pair (a lone last group on its own): up to 32 rows in one SumsPass, 33-64 (kActRowChunk, the most of an
// MXFP4 task) in a ChunkedSumsPass; pairs outside the window by the per-block kernel; then the rows outside it.
void gemm_fp4_amx_sums(const QuantGemmTask& t) {
    DI_CHECK_LE(t.n, kActRowChunk);
    const int64_t kb_count = t.k / 32, tiles = (t.n + kMaxTileRows - 1) / kMaxTileRows;
    ScratchVector<uint16_t> inexact(static_cast<size_t>(tiles * kb_count));
    inexact_rows(t, inexact.data());
    for (int64_t i = 0; i < t.n; ++i)  // (rows outside the window hold zeros here)
        if (t.tile_shift[i] == kWideRow)
            for (int64_t kb = 0; kb < kb_count; ++kb)
                inexact[i / kMaxTileRows * kb_count + kb] &= static_cast<uint16_t>(~(1u << (i % kMaxTileRows)));
    const bool chunked = tiles > 2;
    // one pass: rows m0, m1 of its two row tiles; chunked: every row tile configured with 16 rows
    const int m0 = static_cast<int>(std::min<int64_t>(t.n, kMaxTileRows));
    const int m1 = chunked ? kMaxTileRows : static_cast<int>(t.n - m0);
    SumsScratch scratch;
    ChunkScratch chunk_scratch;
    bool configured = false;
    for (int64_t g0 = 0; g0 < t.groups; g0 += 2) {
        const int G = g0 + 2 <= t.groups ? 2 : 1;
        const ScaleCodeRange codes = scale_code_range(
            t.scales + packed_scale_offset(g0, t.groups, 0, kb_count, kFp4ScaleBytes), G * kb_count * kFp4ScaleBytes);
        if (codes.lo < kScaleLo || codes.hi > kScaleHi) {
            if (configured) _tile_release(), configured = false;
            gemm_pair_apart(t, g0, G, kFp4BlockBytes, kFp4ScaleBytes, gemm_fp4);
            continue;
        }
        if (!configured) configure_tile_pair(chunked ? kMaxTileRows : m0, m1), configured = true;
        float(*sums)[2][kMaxTileRows * 16] = chunked ? chunk_scratch.c : scratch.c;
        if (chunked && G == 2) ChunkedSumsPass<2>(t, chunk_scratch, g0, inexact.data()).run();
        else if (chunked) ChunkedSumsPass<1>(t, chunk_scratch, g0, inexact.data()).run();
        else if (G == 2) SumsPass<2>(t, scratch, g0, m0, m1, inexact.data()).run();
        else SumsPass<1>(t, scratch, g0, m0, m1, inexact.data()).run();
        for (int64_t i = 0; i < tiles; ++i) {
            const int m = static_cast<int>(std::min<int64_t>(kMaxTileRows, t.n - i * kMaxTileRows));
            for (int g = 0; g < G; ++g) store_rows(t, sums[i][g], m, i * kMaxTileRows, g0 + g);
        }
    }
    if (configured) _tile_release();
    gemm_wide_rows_apart(t, gemm_fp4);
}

}  // namespace deepinfer::backend::cpu::avx512
