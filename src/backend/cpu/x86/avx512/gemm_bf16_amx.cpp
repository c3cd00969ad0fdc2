// gemm_bf16 (bf16 x, bf16 W, fp32 sums, one rounding to bf16: torch F.linear on bf16) on AMX tiles, for weights
// prepared as kBf16Tiles (backend/cpu/packing.h) on CPUs where amx_enabled(): the indexer's and the ratio-1
// compressor's linears (spec §5.3.4-5.3.5).
//
// Each bf16 product is exact in fp32; a row's products are summed over all of k in one C tile, block after block
// (tdpbf16ps adds a block's 32 products in its own order), and rounded to bf16 once. That is the fp32 dot product in
// another summation order, as every table's is (docs/numerics.md). A row's sums do not depend on the other rows of
// its tile, on n or on where the row sits: one kernel for every n, so rows stay invariant (the C tiles that wait in
// the scratch between chunks of k come back exactly).
//
// Why: the vdpbf16ps kernel (gemm_dense_avx512.cpp) runs at ~3% of the tile peak on AMX machines.
//
// Tiles (configure_tile_pair): C of row tile i and group g at 2 i + g, A of row tile i at 4 + i, B of group g at
// 6 + g. The activations come as pairs of row tiles (bf16_pair_tiles: each block's two 1 KB A tiles side by side,
// one sequential stream per row pair). Work (isa_ops.h): items of up to kBf16TileItemRows rows, so the weight streams
// from memory once per 256 rows; k in passes whose activations (at most 1 MB) stay in L2 while the task's pairs of
// row groups stream past them; within a pass, per pair of row groups, chunks of kBf16TileChunkBlocks blocks, each
// chunk's B tiles (16 KB) brought into L1 during the chunk before and multiplied by every row pair of the item, A
// from L2. The C tiles wait in the task's scratch between chunks and passes, one item's per pair of row groups; a
// row pair's go out as the next's come in, inside the next's first block (multiply_first_block_swapping: streamed by
// two threads, n = 64 0.85-0.87x the time of four stores, then four loads, between them).
//
// Why passes: one core streamed the weight through this kernel at ~8-9 GB/s here (its prefetches of lines from
// memory hold the core's few fill buffers for a memory latency each), and items sized to keep all of k's activations
// in L2 (128 rows at k = 4096) read the weight twice at n = 256: 128 rows give 128 flops per weight byte, ~1100
// GFLOP/s per core at that rate, which is where the kernel stood. Items of 256 rows in passes of half of k: n = 256
// 12-17% faster streamed by two threads, 20% in a one-core scratch replica (docs/PERFORMANCE.md).
//
// Where the time goes (scratch loops on the Intel Xeon of docs/PERFORMANCE.md, one core, 2x2 tiles): all four tile
// loads from L1 ~80-85% of the tile peak; A from L2 and B from L1, the sums kept in the tiles, ~75-85%; the same with
// the four C tiles stored and reloaded every 8 blocks ~60%, every 16 ~67% (a C store waits for the tile's last
// product: the unit drains); sums kept in the tiles over all of k with A and B both from L2 ~55% (a tile register is
// reloaded only once the products reading it are done: an L2 load's latency shows). Chunks of 4 or 12-24 blocks (the
// B chunk leaves L1; with the next chunk prefetched into L2 only, no faster), C partial sums added by vector code
// instead of reloaded, items of 512 rows, the weight's two groups interleaved block by block, prefetching A into L1
// ahead (software) or B two chunks ahead into L2: each measured slower or no faster here.
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/amx_tiles.h"
#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

constexpr int64_t kTileBytes = 1024;  // one A or B tile: 16 rows of 64 bytes
constexpr int kTileRows = 16;

// The C tiles of one row pair += its A tiles (at a: Two row tiles) x B tiles b0, b1 (G groups) of one block.
template <int G, bool Two>
inline void multiply_block(const uint8_t* a, const uint8_t* b0, const uint8_t* b1) {
    // (A with the streaming hint: 1-8% faster here, the B chunk and the sums keeping more of L1)
    _tile_stream_loadd(4, a, 64);
    if constexpr (Two) _tile_stream_loadd(5, a + kTileBytes, 64);
    _tile_loadd(6, b0, 64);
    if constexpr (G == 2) _tile_loadd(7, b1, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (G == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (Two) {
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (G == 2) _tile_dpbf16ps(3, 5, 7);
    }
}

// multiply_block<G, true> as the first block of a row pair's pass over a chunk of k, the C tiles changing hands
// inside it: the row pair before's go out to out[0..4) and this pair's come in from in[0..4) (zeroed instead where
// `zero`), each C tile stored and reloaded right before its first product here, and each operand loaded right before
// the first product that reads it. The tile unit runs its instructions in order, a C store waits for the tile's last
// product, and a register is reloaded only once the products reading it are done: after four stores and then four
// loads (tile by tile) the first product waited for all of them; here it waits for one C tile. Streamed by two
// threads, n = 64 0.85-0.87x the time, n = 256-1024 0.92-0.98x; a scratch loop of the tile pattern, 95 -> 84 TSC
// cycles per four products (68 with no C trips). The fp8 and MXFP4 kernels, whose passes have decode work between
// them, were no faster so (docs/PERFORMANCE.md, "Forty-third session").
template <int G>
inline void multiply_first_block_swapping(const uint8_t* a, const uint8_t* b0, const uint8_t* b1, float (*out)[256],
                                          float (*in)[256], bool zero) {
#define DI_SWAP_TILE(tile)              \
    _tile_stored(tile, out[tile], 64);  \
    if (zero) _tile_zero(tile);         \
    else _tile_loadd(tile, in[tile], 64);
    DI_SWAP_TILE(0)
    _tile_stream_loadd(4, a, 64);
    _tile_loadd(6, b0, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (G == 2) {
        DI_SWAP_TILE(1)
        _tile_loadd(7, b1, 64);
        _tile_dpbf16ps(1, 4, 7);
    }
    DI_SWAP_TILE(2)
    _tile_stream_loadd(5, a + kTileBytes, 64);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (G == 2) {
        DI_SWAP_TILE(3)
        _tile_dpbf16ps(3, 5, 7);
    }
#undef DI_SWAP_TILE
}

// (the tile intrinsics take register numbers as literals)
template <int G, bool Two>
inline void zero_sums() {
    zero_c_tiles<G>(0);
    if constexpr (Two) zero_c_tiles<G>(1);
}
template <int G, bool Two>
inline void store_sums(float (*c)[256]) {
    store_c_tiles<G>(0, c);
    if constexpr (Two) store_c_tiles<G>(1, c + 2);
}
template <int G, bool Two>
inline void load_sums(float (*c)[256]) {
    load_c_tiles<G>(0, c);
    if constexpr (Two) load_c_tiles<G>(1, c + 2);
}
// The rows [i0, i0 + 32) of a row pair's finished sums (c[2 i + g]: row tile i, group g) to bf16 out, row group g0 + g.
// Past 16 rows (as in the fp8 GEMM's runs; a decode step's few rows are read again at once), a pair of groups fills
// a row's 64-byte line: it goes out by a non-temporal store, which reads nothing first (each line read for ownership
// from memory held a fill buffer the weight's stream needs; gemm_bf16_tiles ends with an sfence). `bench-ops --rows 64 256 1024 --only gemm_bf16`, two threads, three alternating rounds: n = 64 2865-2913
// -> 2548-2670 us, n = 256 5906-6402 -> 5772-5987, n = 1024 26.4-27.3 -> 22.7-23.0 ms (45% of the tile peak).
template <int G, bool Two>
void store_out(const DenseGemmTask& t, float (*c)[256], int64_t i0, int64_t g0) {
    auto* out = static_cast<bf16*>(t.out);
    for (int i = 0; i < (Two ? 2 : 1); ++i) {
        const int64_t r0 = i0 + i * kTileRows;
        const int rows = t.n - r0 < kTileRows ? static_cast<int>(t.n - r0) : kTileRows;
        if (Two && G == 2 && t.rows - g0 * kTileRows >= 32 &&
            (reinterpret_cast<uintptr_t>(out + g0 * kTileRows) & 63) == 0 && t.ldo % 32 == 0) {
            for (int r = 0; r < rows; ++r)
                stream_line(out + (r0 + r) * t.ldo + g0 * kTileRows, _mm512_load_ps(c[2 * i] + 16 * r),
                            _mm512_load_ps(c[2 * i + 1] + 16 * r));
            continue;
        }
        for (int g = 0; g < G; ++g) {
            const __mmask16 mask = lane_mask(t.rows - (g0 + g) * kTileRows);
            for (int r = 0; r < rows; ++r)
                store_row(out + (r0 + r) * t.ldo + (g0 + g) * kTileRows, mask, _mm512_load_ps(c[2 * i + g] + 16 * r));
        }
    }
}

// Row groups g0 (and g0 + 1 when G = 2) against the item's `pairs` row pairs from row i0, blocks [kb0, kb1) of k;
// sums: their C tiles between chunks and passes (4 per row pair).
template <int G, bool Two>
void group_pair(const DenseGemmTask& t, int64_t i0, int64_t pairs, int64_t g0, int64_t kb0, int64_t kb1,
                float (*sums)[256]) {
    const int64_t kb_count = t.k / 32;
    const auto* w = static_cast<const uint8_t*>(t.w);
    const uint8_t* b0 = w + g0 * kb_count * kTileBytes;
    const uint8_t* b1 = b0 + kb_count * kTileBytes;
    const uint8_t* acts = static_cast<const uint8_t*>(t.x) + i0 / 32 * kb_count * 2 * kTileBytes;
    // One row pair reuses no chunk: its sums stay in the tiles over all of k (one pass).
    const int64_t chunk = pairs == 1 ? kb_count : kBf16TileChunkBlocks;
    alignas(64) float finished[4][256];
    for (int64_t k0 = kb0; k0 < kb1; k0 += chunk) {
        const int64_t k1 = k0 + chunk < kb1 ? k0 + chunk : kb1;
        // The next chunk's B tiles (this pair's, else the next pair's first of this pass) into L1, a few lines per
        // block step of the row pairs: the first row pair of a chunk otherwise waits for each of them in turn, and a
        // burst of them (a row pair's share at once) stalled on the fill buffers. (Past the weight's last group the
        // addresses are not read: prefetches do not fault.)
        const uint8_t* next0 = k1 < kb1 ? b0 + k1 * kTileBytes : b0 + (2 * kb_count + kb0) * kTileBytes;
        const int64_t next_tiles = k1 < kb1 ? kb1 - k1 : kb1 - kb0;
        const int64_t next_lines = (next_tiles < chunk ? next_tiles : chunk) * kTileBytes / 64;
        const int64_t per_step = (next_lines + pairs * (k1 - k0) - 1) / (pairs * (k1 - k0));
        int64_t line = 0;
        // where a row pair's sums go after this chunk: the scratch, or `finished` at the last chunk of k
        auto out_of = [&](int64_t p) { return k1 < kb_count ? sums + 4 * p : finished; };
        for (int64_t p = 0; p < pairs; ++p) {
            float(*c)[256] = sums + 4 * p;
            // (the pairs after the first come in as the one before goes out, inside their first block)
            if (p == 0) {
                if (k0 == 0) zero_sums<G, Two>();
                else load_sums<G, Two>(c);
            }
            const uint8_t* a = acts + (p * kb_count + k0) * 2 * kTileBytes;
            for (int64_t kb = k0; kb < k1; ++kb, a += 2 * kTileBytes) {
                if (pairs == 1) {
                    // Each group's next tile into L1 (the weight streams from memory here), as gemm_head_amx.cpp does.
#pragma GCC unroll 16
                    for (int l = 0; l < 16; ++l) {
                        _mm_prefetch(reinterpret_cast<const char*>(b0 + (kb + 1) * kTileBytes + 64 * l), _MM_HINT_T0);
                        if constexpr (G == 2)
                            _mm_prefetch(reinterpret_cast<const char*>(b1 + (kb + 1) * kTileBytes + 64 * l),
                                         _MM_HINT_T0);
                    }
                } else {
                    for (int64_t end = line + per_step < next_lines ? line + per_step : next_lines; line < end; ++line) {
                        _mm_prefetch(reinterpret_cast<const char*>(next0 + 64 * line), _MM_HINT_T0);
                        if constexpr (G == 2)
                            _mm_prefetch(reinterpret_cast<const char*>(next0 + kb_count * kTileBytes + 64 * line),
                                         _MM_HINT_T0);
                    }
                }
                if (kb > k0 || p == 0) {
                    multiply_block<G, Two>(a, b0 + kb * kTileBytes, b1 + kb * kTileBytes);
                    continue;
                }
                // the pair before's sums wait in the scratch for the next chunk, or they are done (more than one
                // row pair: two row tiles each)
                multiply_first_block_swapping<G>(a, b0 + kb * kTileBytes, b1 + kb * kTileBytes, out_of(p - 1), c,
                                                 k0 == 0);
                if (k1 == kb_count) store_out<G, Two>(t, finished, i0 + 32 * (p - 1), g0);
            }
        }
        store_sums<G, Two>(out_of(pairs - 1));
        if (k1 == kb_count) store_out<G, Two>(t, finished, i0 + 32 * (pairs - 1), g0);
    }
}

}  // namespace

void bf16_pair_tiles(const bf16* x, int64_t n, int64_t k, int64_t p0, int64_t p1, bf16* out) {
    const int64_t kb_count = k / 32;
    const auto* src = reinterpret_cast<const uint16_t*>(x);
    auto* dst = reinterpret_cast<uint16_t*>(out);
    for (int64_t p = p0; p < p1; ++p)
        for (int64_t r = 0; r < 32; ++r) {
            const int64_t i = 32 * p + r;
            // row r of the pair: tile r / 16, row r % 16 of it, in every block
            uint16_t* o = dst + (p * kb_count * 2 + r / 16) * 512 + (r % 16) * 32;
            for (int64_t kb = 0; kb < kb_count; ++kb, o += 1024) {
                const __m512i v = i < n ? _mm512_loadu_si512(src + i * k + 32 * kb) : _mm512_setzero_si512();
                _mm512_store_si512(o, v);
            }
        }
}

void gemm_bf16_tiles(const DenseGemmTask& t) {
    const int64_t groups = (t.rows + kTileRows - 1) / kTileRows, kb_count = t.k / 32;
    auto* sums = reinterpret_cast<float(*)[256]>(t.scratch);
    // Up to 16 rows: one row tile of n rows (fewer rows, faster products); else pairs of 16-row tiles (the pair
    // tiles' rows past n are zero).
    const bool two = t.n > kTileRows;
    configure_tile_pair(two ? kTileRows : static_cast<int>(t.n), two ? kTileRows : 0);
    for (int64_t i0 = 0; i0 < t.n; i0 += kBf16TileItemRows) {
        const int64_t item = t.n - i0 < kBf16TileItemRows ? t.n - i0 : kBf16TileItemRows;
        const int64_t pairs = (item + 31) / 32, pass = bf16_tile_pass_blocks(pairs, kb_count);
        for (int64_t kb0 = 0; kb0 < kb_count; kb0 += pass) {
            const int64_t kb1 = kb0 + pass < kb_count ? kb0 + pass : kb_count;
            for (int64_t g0 = 0; g0 < groups; g0 += 2) {
                // (one pass: every pair of row groups reuses the same sums)
                float(*c)[256] = pass < kb_count ? sums + g0 / 2 * pairs * 4 : sums;
                const bool pair = g0 + 1 < groups;
                if (two && pair) group_pair<2, true>(t, i0, pairs, g0, kb0, kb1, c);
                else if (two) group_pair<1, true>(t, i0, pairs, g0, kb0, kb1, c);
                else if (pair) group_pair<2, false>(t, i0, pairs, g0, kb0, kb1, c);
                else group_pair<1, false>(t, i0, pairs, g0, kb0, kb1, c);
            }
        }
    }
    _mm_sfence();  // (store_out's non-temporal stores)
    _tile_release();
}

}  // namespace deepinfer::backend::cpu::avx512
