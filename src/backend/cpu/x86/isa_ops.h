// The per-ISA compute routines behind the CPU kernel tables, over raw arrays and index ranges. Drivers in
// backend/cpu (compiled for the baseline ISA) own threading, partitioning, scratch and packing and call
// these. The ISA translation units (x86/avx2, x86/avx512) are compiled with their target flags and define
// only functions in their own namespace, instantiating no std templates: a weak (COMDAT) symbol built
// with AVX-512 flags could otherwise be picked by the linker for code that an AVX2 machine runs.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/numeric.h"
#include "core/quant_records.h"

namespace deepinfer::backend::cpu {

// Activation rows per pass over a row group: the decoded rows (64 x k x 2 bytes) stay in L2.
inline constexpr int64_t kActRowChunk = 64;
// How far ahead the read-bandwidth probe's prefetching pass (IsaOps::read_stream) requests lines into L2.
inline constexpr size_t kProbeAheadBytes = 16384;
// Scratch floats of a quantized GEMM task: decoded 16-row weight panels (an fp32 one: 16 k; AVX2's integer
// MXFP4 GEMM an int8 one, 4 k; AMX's MXFP4 GEMM keeps masks past 16 k), the block scales (16 per 32 columns),
// accumulators of kActRowChunk rows x 16 lanes, slack. (Dense GEMMs have their own: dense_scratch_floats.)
// Row groups per pass of the AVX-512 table's gemm_f32_bf16w on tiles (gemm_head_amx.cpp: one C tile each), and
// the fewest weight rows for which prepare_bf16 makes the tiles (cpu_gemm.cpp).
inline constexpr int64_t kBf16TilePassGroups = 3, kBf16TilesMinRows = 64;
// gemm_bf16 on tiles (avx512/gemm_bf16_amx.cpp): items of up to kBf16TileItemRows activation rows (the weight streams
// from memory once per item), k in passes of bf16_tile_pass_blocks blocks (the item's activations of a pass, at most
// kBf16TileItemActBytes, stay in L2 while the task's pairs of row groups stream past them) and, within a pass, chunks
// of kBf16TileChunkBlocks blocks (a pair of row groups' chunk, 16 KB, stays in L1 for every row pair of the item). A
// pair of row groups' C tiles wait in the task's scratch between chunks and between passes (bf16_tile_sums_floats).
// Activations come as pairs of row tiles (IsaOps::bf16_pair_tiles): bf16_pair_tiles_elems(n, k) elements.
inline constexpr int64_t kBf16TileItemRows = 256, kBf16TileChunkBlocks = 8, kBf16TileItemActBytes = 1 << 20;
// gemm_f32 of 2 kF32LaneRows rows and more: tiles of kF32LaneRows activation rows over the pool, each task every
// weight row (the AVX-512 kernel puts a tile's rows in the lanes: gemm_dense_avx512.cpp).
inline constexpr int64_t kF32LaneRows = 16;
// From this many activation rows on, gemm_f32_bf16w splits x into pairs form once per call for all threads
// (IsaOps::gemm_f32_pairs_bf16w); fewer rows split it in registers as they load it, the same bits. Zen 4, one
// thread, the head: split beforehand n = 4-16 0.78-0.81x the time of the split in registers, n = 2 1.20x and
// n = 1, 3 1.01-1.05x (bench-ops --per-call, the two alternated call by call; docs/PERFORMANCE.md, "Fifty-fifth").
inline constexpr int64_t kF32PairsMinRows = 4;
// Blocks of k per pass for an item of `pairs` row pairs (one pair: all of k, its sums staying in the tiles).
inline int64_t bf16_tile_pass_blocks(int64_t pairs, int64_t kb_count) {
    const int64_t fit = kBf16TileItemActBytes / (pairs * 2048) / kBf16TileChunkBlocks * kBf16TileChunkBlocks;
    if (pairs == 1 || fit >= kb_count) return kb_count;
    return fit > kBf16TileChunkBlocks ? fit : kBf16TileChunkBlocks;
}
// Scratch floats of a task of `rows` weight rows: one item's sums (4 C tiles per row pair) per pair of row groups
// where k takes more than one pass, else those of one pair of row groups.
inline int64_t bf16_tile_sums_floats(int64_t n, int64_t k, int64_t rows) {
    const int64_t pairs = ((n < kBf16TileItemRows ? n : kBf16TileItemRows) + 31) / 32;
    const int64_t group_pairs = bf16_tile_pass_blocks(pairs, k / 32) < k / 32 ? (rows + 31) / 32 : 1;
    return group_pairs * pairs * 4 * 256;
}
inline int64_t bf16_pair_tiles_elems(int64_t n, int64_t k) { return (n + 31) / 32 * 32 * k; }
// The most rows of one work item of an fp8 GEMM on AMX tiles (IsaOps::fp8_tile_item_rows), and the fp32 sums of
// kTileRunPairs pairs of row groups of such an item that wait in the task's scratch between chunks of k
// (avx512/gemm_fp8_amx.cpp; runs of 8 pairs rather than 4: k = 5120 and 8192 8-15% faster in cache, the chunk of
// the item's activations staying in L2 across more pairs).
inline constexpr int64_t kTileItemRows = 256, kTileRunPairs = 8;
inline constexpr int64_t kTileSumsFloats = kTileRunPairs * (kTileItemRows / 16) * 2 * 256;
// The AVX-512 fp8 / MXFP4 GEMMs of many rows on vdpbf16ps (avx512/gemm_quant_avx512.cpp,
// run_panel): a pair's decoded chunk of kQuantPanelBlocks blocks (32 vectors a block) and the accumulators of up to
// kActRowChunk rows x 2 groups, past everything else in the scratch (the AMX fp8 kernel hands it pairs while its
// sums wait there).
// From how many rows: fp8 32 (at 16-24 rows the streaming kernel was faster in cache on Zen 5), MXFP4 16 (the
// integer kernel was 15-35% slower there at 16-24 rows; at 5-12 the panel won in cache but lost streamed).
inline constexpr int64_t kQuantPanelBlocks = 8, kFp8PanelMinRows = 32, kFp4PanelMinRows = 16;
inline constexpr int64_t kQuantPanelFloats = kQuantPanelBlocks * 32 * 16 + kActRowChunk * 2 * 16;
inline int64_t quant_panel_offset(int64_t k) {
    return (std::max<int64_t>(24 * k + k / 2 + k / 32 + kActRowChunk * 16, kTileSumsFloats) + 15) / 16 * 16;
}
// (fp8 tasks on tiles: kTileSumsFloats; on vdpbf16ps: the panel)
inline int64_t gemm_scratch_floats(int64_t k) { return quant_panel_offset(k) + kQuantPanelFloats + 256; }
// The bf16 elements of IsaOps::fp8_tile_acts / fp4_tile_acts' output for n rows of k columns: whole tiles of 16
// rows, each block of 32 columns of a tile's rows together (avx512/block_decode.h, tile_acts_at).
inline int64_t tile_acts_elems(int64_t n, int64_t k) { return (n + 15) / 16 * 16 * k; }

// Where a row group lies in packed codes or scales (packing.h). Row groups are stored in pairs (2p, 2p + 1)
// that share their blocks: block kb of a pair holds the two groups' pieces alternately (codes: 64-byte
// chunks; scales: a group's scales of the block), so a kernel running both groups of a pair reads one
// sequential stream. A trailing odd group is alone. Piece c of block kb of group g lies at
// offset + kb * block_stride + c * piece_stride.
struct PackedGroup {
    int64_t offset, block_stride, piece_stride;
};
// `groups` = the groups packed together, counted from an even group of the weight; `block_bytes` = one
// group's bytes of a block, `piece_bytes` = the unit of interleaving. Static: the ISA TUs may share no
// COMDAT symbol.
static inline constexpr PackedGroup packed_group(int64_t g, int64_t groups, int64_t kb_count, int64_t block_bytes,
                                                 int64_t piece_bytes) {
    const int64_t pair = g / 2, width = groups - 2 * pair >= 2 ? 2 : 1;
    return {2 * pair * kb_count * block_bytes + g % 2 * piece_bytes, width * block_bytes, width * piece_bytes};
}
// Offset of the scales of block kb of group g (each group's scales of a block are one piece).
static inline constexpr int64_t packed_scale_offset(int64_t g, int64_t groups, int64_t kb, int64_t kb_count,
                                                    int64_t unit) {
    const PackedGroup pg = packed_group(g, groups, kb_count, unit, unit);
    return pg.offset + kb * pg.block_stride;
}
// The 64-byte code chunks of a block are the pieces of the codes.
inline constexpr int64_t kPackedChunkBytes = 64;

// The integer form of one act_quant row that the integer MXFP4 kernels read (IsaOps::prep_fp4_row, AVX2's
// gemv_fp4_int_avx2.cpp for one row; the AVX-512 GEMM reads the same rows, any number), per 32-column block kb:
//   planes [kb][2][32] int8: the block's integers as v = 256 * hi + lo (lo plane first), each plane in the
//          column order of the packed MXFP4 dwords: byte 8c + 4h + i holds column 8c + {0,4,1,5}[i] for
//          h = 0 (the low nibbles of chunk c) and 8c + {2,6,3,7}[i] for h = 1 (the high nibbles; packing.h)
//   base   [kb] int32: -12 * sum(v), the start of the low plane's sum (takes the weights' bias back out)
//   unit   [kb] fp32: 2^(e - 11) * kFp4RowUnitScale, one unit of the integer block product (the scale is the
//          AVX2 fp32 decode's: its weights come as value * 2^-25)
//   exact  [kb] uint8: kFp4PlanesExact when the block's integers fit the two planes and it holds no NaN code,
//          plus kFp4SumsExact when it holds no NaN code and 12 * sum |v| < 2^24 (|2 w| <= 12): then every
//          partial sum of its products, in units of 2^(e - 11), is an fp32 integer below 2^24, so any order of
//          summation gives the exact sum (AMX tiles, gemm_amx.cpp; planes holding it implies this)
//   top    [kb][32] int8: a third plane, v = 65536 * top + 256 * hi + lo with the two planes as above (hi then
//          the low byte of the wider hi), in the planes' column order: 0 where two planes hold v, and the three
//          always do (|v| <= 15 * 2^14); AVX2's GEMV reads it for blocks with kFp4SumsExact but not
//          kFp4PlanesExact
// Rows of a GEMM lie `bytes` apart, a multiple of 64 (the arrays stay aligned in every row). (AVX2's GEMM of
// 5-64 rows reads another form: Fp4PanelRow in x86/avx2/fp4_chunk.h.)
struct Fp4RowLayout {
    int64_t base, unit, exact, top, bytes;  // byte offsets of the arrays after the planes, and the row's size
};
static inline constexpr Fp4RowLayout fp4_row_layout(int64_t kb_count) {
    const int64_t top = (73 * kb_count + 31) / 32 * 32;
    return {64 * kb_count, 68 * kb_count, 72 * kb_count, top, (top + 32 * kb_count + 63) / 64 * 64};
}
inline constexpr float kFp4RowUnitScale = 0x1p25f;
inline constexpr uint8_t kFp4PlanesExact = 1, kFp4SumsExact = 2;
// The largest sum of a block's |v| whose products no fp32 partial sum can round: 12 * sum < 2^24 (|2 w| <= 12).
inline constexpr int32_t kFp4MaxChainSum = ((1 << 24) - 1) / 12;
// The AMX GEMMs' activation rows (IsaOps::fp8_tile_acts, fp4_tile_acts): the row shift of a row their window cannot
// hold.
inline constexpr int32_t kWideRow = INT32_MIN;
// The most rows the integer MXFP4 kernels take where AMX runs: more go to the tiles (gemm_quant_avx512.cpp gemm_fp4).
inline constexpr int64_t kFp4IntegerMaxRows = 4;

// fp8 / MXFP4 GEMM of all activation rows against `groups` packed row groups (packing.h), the first of
// them an even group of the weight (pairs stay whole).
struct QuantGemmTask {
    const void* acts;         // decoded activations [n, k], IsaOps::act_bytes each (see decode_acts)
    const float* act_scales;  // fp32 [n, k/32]
    int64_t n, k;             // n <= kActRowChunk (the AVX-512 fp8 GEMM: n <= kTileItemRows)
    const uint8_t* codes;     // packed codes of the first group
    const uint8_t* scales;    // packed scales of the first group
    int64_t groups;
    int64_t rows;  // valid output rows of these groups (<= 16 * groups)
    bf16* out;     // out[0, first row of the first group]
    int64_t ldo;
    float* scratch;  // gemm_scratch_floats(k), 64-byte aligned
    float* out_f32 = nullptr;  // when set, fp32 results go here (same indexing as out) instead of bf16
    bool plain_scales = false;  // PackedWeight::plain_scales of the weight
    bool plain_codes = false;   // PackedWeight::plain_codes of the weight
    // MXFP4 where the ISA's GEMM of n rows reads them (IsaOps::fp4_row_bytes): the rows in their integer form,
    // fp4_row_bytes(k, n) apart (else null).
    const uint8_t* fp4_row = nullptr;
    // fp8 prepared without NaN codes, where the ISA has IsaOps::fp8_bits_acts and it accepted the activations:
    // the activations in the form its bit-placing decode reads, and the weight's subnormal-block flags of the
    // first group (packing.h; else null).
    const void* bits_acts = nullptr;
    const uint8_t* block_flags = nullptr;
    // fp8 or MXFP4 where the ISA has IsaOps::fp8_tile_acts / fp4_tile_acts and it took the activations: the rows
    // scaled for its AMX kernel (bf16, tile-blocked: tile_acts_elems) and each row's power of two (else null).
    const void* tile_acts = nullptr;
    const int32_t* tile_shift = nullptr;
};

// Where the task's pair (or lone group) from g0 keeps its per-block pieces of `unit` bytes a group (base: the task's
// scales, or its block flags, laid out alike): block kb of group g0 + g at (kb * G + g) * unit bytes on. The decode
// kernels find it once per pair: worked out per block, the offsets cost a core up to a fifth of its fp8 stream
// (AVX-512, docs/PERFORMANCE.md "Fifty-seventh session").
inline const uint8_t* pair_pieces(const uint8_t* base, const QuantGemmTask& t, int64_t g0, int64_t unit) {
    return base + packed_scale_offset(g0, t.groups, 0, t.k / 32, unit);
}

// out[i, j] = sum_k x[i, k] w[j, k] for i < n, j < rows (pointers at the first row of the range).
struct DenseGemmTask {
    const void* x;  // bf16 or fp32 [n, k]
    int64_t n, k;
    const void* w;  // bf16 or fp32 [rows, k]
    int64_t rows;
    void* out;  // bf16 or fp32, row stride ldo
    int64_t ldo;
    float* scratch = nullptr;  // dense_scratch_floats(n, k, weight bytes), 64-byte aligned
};
// Activation rows from which the dense GEMMs take their blocked path, and the scratch floats a dense GEMM task
// of n rows and w_bytes-wide weights needs there for bf16 weights (fp32 weights, gemm_f32, take none): AVX2
// holds a block of 16 weight rows and 64 activation rows as fp32, each row k + kDenseAvx2RowPad floats apart
// (80 of them), AVX-512 the 16-lane sums of 16 weight rows x 128 activation rows between chunks of k after a
// packed chunk of 16 rows x 512 columns (kDenseBlockedScratchFloats).
// (The AVX2 table takes it from fewer rows where ymm ops issue as two halves: gemm_dense_avx2.cpp blocked_min_rows;
// kDenseBlockedFewestRows is the fewest any table does.)
inline constexpr int64_t kDenseBlockedMinRows = 16;
inline constexpr int64_t kDenseBlockedFewestRows = 4;
inline constexpr int64_t kDenseBlockedScratchFloats = 16 * 512 / 2 + 16 * 128 * 16;
inline constexpr int64_t kDenseAvx2RowPad = 16;
inline int64_t dense_scratch_floats(int64_t n, int64_t k, int64_t w_bytes) {
    if (n < kDenseBlockedFewestRows || w_bytes != 2) return 0;
    const int64_t avx2 = 80 * (k + kDenseAvx2RowPad);
    return avx2 > kDenseBlockedScratchFloats ? avx2 : kDenseBlockedScratchFloats;
}

// Sparse sink attention (spec §4.7) of query rows [i0, i1) and heads [h0, h1); see Kernels::sparse_attn.
struct SparseAttnTask {
    const bf16* q;  // [m, heads, dim]
    int heads, dim;
    const bf16* kv;      // [n_kv, dim]
    const int32_t* idx;  // [m, topk]
    int topk;
    const float* sink;  // [heads]
    float scale;
    bf16* out;  // [m, heads, dim]
    int64_t i0, i1;
    int h0, h1;
    void* scratch;  // sparse_attn_scratch_bytes(h1 - h0, dim)
};
inline size_t sparse_attn_scratch_bytes(int heads, int dim) {
    // the kv block in two arrangements (64 x dim, fp32 at most), per head: scores and probabilities (64
    // fp32 each), accumulators and the query as fp32 (dim each), running max / sum / rescale; alignment
    return static_cast<size_t>(2 * 64 * dim * 4) + static_cast<size_t>(heads) * (2 * 64 * 4 + 2 * dim * 4 + 3 * 4) +
           4 * 64;
}

// Indexer scores (spec §5.3.5) of query rows [i0, i1) against keys [j0, j1); see Kernels::index_scores.
struct IndexScoresTask {
    const bf16* q;  // [m, heads, dim]
    int heads, dim;
    const bf16* keys;  // [n, dim]
    const bf16* w;     // [m, heads]
    float* out;        // [m, ldo]
    int64_t ldo;
    int64_t i0, i1, j0, j1;
    void* scratch;  // index_scores_scratch_bytes(heads, dim)
};
// A transposed block of 64 keys and one query's heads, fp32 at most.
inline size_t index_scores_scratch_bytes(int heads, int dim) {
    return static_cast<size_t>(64 * dim * 4) + static_cast<size_t>(heads) * dim * 4 + 4 * 64;
}

// Indexer scores from fp4 records (Kernels::index_scores_fp4) in integers. Each e2m1 value is taken doubled, an
// integer in [-12, 12]. The keys are read as bytes of (doubled value + 12), unsigned (x86_tables.h kE2M1Biased, the
// integer MXFP4 GEMV's operand too), so that u8 x s8 dot products (vpdpbusd, vpmaddubsw) apply; each query group's
// bias, -12 x the sum of its doubled values (kE2M1Twice), takes the offset back out. A group's integer sum is then
// exactly 4 x the sum of its code products, at most 32 x 144 in magnitude, and the group scale / 4 that the query
// carries makes it the exact fp32 group dot product.
// A query head as the driver prepares it (cpu_attention.cpp prepare_fp4_queries): the doubled values as int8 [dim],
// then per group of 32 the int32 bias [dim / 32], then the fp32 group scale / 4 [dim / 32].
inline size_t fp4_query_head_bytes(int dim) { return static_cast<size_t>(dim) + 8 * static_cast<size_t>(dim / 32); }
struct IndexScoresFp4Task {
    const uint8_t* q;  // [m, heads] prepared query heads, fp4_query_head_bytes(dim) each
    int heads, dim;
    const uint8_t* const* keys;  // [n] index-key records
    const bf16* w;               // [m, heads]
    float* out;                  // [m, ldo]
    int64_t ldo;
    int64_t i0, i1, j0, j1;
    void* scratch;  // index_scores_fp4_scratch_bytes(dim)
};
// A block of 64 keys: their bytes in dwords of 4 dims (dim / 4 x 64) and group scales (dim / 32 x 64 fp32).
inline size_t index_scores_fp4_scratch_bytes(int dim) {
    return static_cast<size_t>(dim) * 64 + static_cast<size_t>(dim / 32) * 64 * 4 + 64;
}

struct IsaOps {
    Isa isa;
    // act_quant (spec §4.2) of rows [r0, r1) of x [n, k].
    void (*act_quant_rows)(const bf16* x, int64_t k, uint8_t* codes, uint8_t* scales, int64_t r0, int64_t r1);
    // Decode act_quant output to the form the quantized GEMMs read: values [n, k] of act_bytes each
    // (bf16 for AVX-512, fp32 for AVX2; exact either way) and fp32 scales [n, k/32].
    int act_bytes;
    void (*decode_acts)(const uint8_t* codes, const uint8_t* scales, int64_t n, int64_t k, void* values,
                        float* act_scales);
    void (*gemm_fp8)(const QuantGemmTask& task);
    void (*gemm_fp4)(const QuantGemmTask& task);
    void (*gemm_bf16)(const DenseGemmTask& task);       // bf16 x, bf16 w, bf16 out
    void (*gemm_f32_bf16w)(const DenseGemmTask& task);  // fp32 x, bf16 w, fp32 out
    void (*gemm_f32)(const DenseGemmTask& task);        // fp32 x, fp32 w, fp32 out
    void (*sparse_attn)(const SparseAttnTask& task);
    void (*index_scores)(const IndexScoresTask& task);
    void (*index_scores_fp4)(const IndexScoresFp4Task& task);
    // Machine probes (backend/cpu/machine_probe.h): sum of a 64-byte aligned buffer read once (with `ahead`, each
    // line also requested kProbeAheadBytes ahead into L2), and iters x 12 independent vector FMAs / bf16 dot
    // products (fp32 FMAs where the ISA has none).
    uint64_t (*read_stream)(const uint8_t* p, size_t bytes, bool ahead);
    float (*fma_loop)(int64_t iters);
    float (*dot_loop)(int64_t iters);
    int vector_floats;  // fp32 lanes of the probe loops' registers

    // Row-wise ops (Kernels::rms_norm ... gather_fp8_rows, same semantics) over rows [r0, r1) of the full
    // arrays; the drivers in cpu_rowwise.cpp split the rows over the pool.
    void (*rms_norm_rows)(const bf16* x, int dim, const bf16* w, float eps, bf16* y, int64_t r0, int64_t r1);
    void (*swiglu_rows)(const bf16* gate, const bf16* up, int inter, float limit, const float* row_weight, bf16* h,
                        int64_t r0, int64_t r1);
    void (*rope)(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin,
                 bool inverse);
    void (*pair_pool)(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out);
    // hc <= kMaxSimdHc (the driver uses the reference beyond).
    void (*hc_sinkhorn_rows)(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps,
                             float* pre, float* post, float* comb, int64_t r0, int64_t r1);
    void (*hc_collapse_rows)(const bf16* x, const float* pre, int hc, int dim, bf16* y, int64_t r0, int64_t r1);
    void (*hc_expand_rows)(const bf16* o, const bf16* res, const float* post, const float* comb, int hc, int dim,
                           bf16* out, int64_t r0, int64_t r1);
    // topk_entries in two passes around a radix select: keys[j] = ref::topk_order_key(scores[j]); then the
    // entries with key > threshold and the first `ties` with key == threshold, ascending; returns their count.
    void (*order_keys)(const float* scores, int64_t n, uint32_t* keys);
    int64_t (*select_entries)(const uint32_t* keys, int64_t n, uint32_t threshold, int64_t ties, int32_t* out);
    void (*gather_fp8_rows)(const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows, bf16* out,
                            int64_t r0, int64_t r1);
    void (*unpack_records_rows)(CacheRecord kind, const uint8_t* const* records, int dim, bf16* out, int64_t r0,
                                int64_t r1);
    // Optional (AVX2, AVX-512): act_quant rows of k codes in the integer form the table's MXFP4 GEMM of n rows
    // reads (QuantGemmTask::fp4_row): fp4_row_bytes(k, n) bytes a row, 0 when that GEMM reads none; prep_fp4_row
    // makes one row of it. decode_acts still gives the rows' values and scales.
    int64_t (*fp4_row_bytes)(int64_t k, int64_t n) = nullptr;
    void (*prep_fp4_row)(const uint8_t* codes, int64_t k, int64_t n, uint8_t* out) = nullptr;
    // Optional (AVX2, AVX-512): decoded activations [n, k] (decode_acts' e4m3 values when `e4m3`, else bf16 rows taken
    // as they are) in the form the table's fp8 bit-placing decode reads, into out (fp8_bits_acts_bytes(n, k)
    // bytes); false when that decode does not take them (too many rows, or a value outside its range). The
    // driver calls it once per thread and GEMM, like decode_acts, rather than every work unit doing it.
    bool (*fp8_bits_acts)(const void* acts, int64_t n, int64_t k, bool e4m3, void* out) = nullptr;
    int64_t (*fp8_bits_acts_bytes)(int64_t n, int64_t k) = nullptr;
    // Optional (AVX-512 where amx_enabled()): gemm_f32_bf16w on a kBf16Tiles weight (packing.h). task.x holds
    // the fp32 rows split exactly into three bf16 planes (split_bf16x3_rows), each [n, k]; task.w
    // points at the tiles of the first row group, task.rows counts the valid rows from there.
    void (*gemm_f32_bf16w_tiles)(const DenseGemmTask& task) = nullptr;
    // Optional (AVX-512 where amx_enabled()): decoded activations [n, k] and their scales [n, k/32] as the AMX fp8
    // GEMM reads them (gemm_fp8_amx.cpp): row i's values a * sa * 2^row_shift[i] in bf16 at out, tile-blocked
    // (tile_acts_elems(n, k) elements); false when that kernel does not run. Called once per thread and GEMM, like
    // decode_acts.
    bool (*fp8_tile_acts)(const void* acts, const float* act_scales, int64_t n, int64_t k, void* out,
                          int32_t* row_shift) = nullptr;
    // Optional (AVX-512 where amx_enabled()): the same for the MXFP4 GEMM of n rows where it sums over all of k on
    // the tiles (gemm_fp4_amx_sums.cpp): a * sa in bf16, row_shift 0, or kWideRow for a row outside its window
    // (zeros). A row's blocks whose flags in its integer form (fp4_rows, row_bytes apart: Fp4RowLayout::exact)
    // lack kFp4SumsExact come out zero too: the kernel sums those by their chains.
    bool (*fp4_tile_acts)(const void* acts, const float* act_scales, const uint8_t* fp4_rows, int64_t row_bytes,
                          int64_t n, int64_t k, void* out, int32_t* row_shift) = nullptr;
    // Optional (AVX-512; call only where amx_enabled()): iters x 4 tdpbf16ps on tiles in registers, the machine
    // probe of the tile peak (machine_probe.h); returns a value of the sums.
    float (*tile_loop)(int64_t iters) = nullptr;
    // Optional, beside fp8_tile_acts: the rows of one work item of the fp8 GEMM on tiles (kTileItemRows: each
    // weight block is decoded once per item), or 0 where fp8_tile_acts does not run (then kActRowChunk).
    int64_t (*fp8_tile_item_rows)() = nullptr;
    // Optional (AVX-512; call only where amx_enabled()): gemm_bf16 on a kBf16Tiles weight. task.x holds the rows as
    // bf16_pair_tiles gives them, task.w the tiles of the first row group, task.rows the valid rows from there,
    // task.scratch bf16_tile_sums_floats(n, k, rows).
    void (*gemm_bf16_tiles)(const DenseGemmTask& task) = nullptr;
    // ... and its activations: row pairs [p0, p1) of x [n, k] as pairs of 16-row A tiles, block by block (pair p's
    // block kb at (p * k / 32 + kb) * 1024 elements: the tile of rows 32 p .. 32 p + 15, then that of the next 16),
    // rows past n zero.
    void (*bf16_pair_tiles)(const bf16* x, int64_t n, int64_t k, int64_t p0, int64_t p1, bf16* out) = nullptr;
    // Optional (AVX-512), beside prep_fp4_row: of a row's integer form only the exact flags' kFp4SumsExact bits
    // (Fp4RowLayout::exact; kFp4PlanesExact left clear, the rest unwritten) -- all that the AMX MXFP4 GEMMs of
    // more than kFp4IntegerMaxRows rows read (gemm_fp4_amx_sums.cpp, gemm_amx.cpp). The driver gives the rows
    // outside the tiles' window the whole form: they go to the integer kernel, which would take each block of a
    // flags-only row by its vdpbf16ps chain (the same bits, slower).
    void (*prep_fp4_flags)(const uint8_t* codes, int64_t k, uint8_t* out) = nullptr;
    // Every table: Kernels::gemm_f32_squares of `tiles` whole tiles of kF32LaneRows rows from x (row stride
    // k) against all fn_rows rows of fn [fn_rows, k] (row stride k): out [tiles * kF32LaneRows rows, ldo apart]
    // [fn_rows], and each row's sum of squares to squares where not null.
    void (*gemm_f32_squares_tiles)(const bf16* x, int64_t tiles, int64_t k, const float* fn, int64_t fn_rows,
                                   float* out, int64_t ldo, float* squares) = nullptr;
    // Optional (AVX-512): gemm_f32_bf16w with task.x in pairs form, the same bits; the driver takes it from
    // kF32PairsMinRows rows on. Pairs form (f32_pair_rows): each row f32_pairs_stride(k) floats, every 32-column
    // block's 16 even columns, then its 16 odd ones (the order of the bf16 pairs in a 64-byte load of the weight
    // row), zero past k.
    void (*gemm_f32_pairs_bf16w)(const DenseGemmTask& task) = nullptr;
    // ... and its activations: rows [i0, i1) of x (row stride k) in pairs form at out (row stride f32_pairs_stride).
    void (*f32_pair_rows)(const float* x, int64_t k, int64_t i0, int64_t i1, float* out) = nullptr;
    // Every table: Kernels::gemm_f32_squares of n rows of x (row stride k) against fn's rows [0, fn_rows) (row
    // stride k): out [n rows, ldo apart][fn_rows] and, where squares is not null, each row's sum of squares -- the
    // reference's chains, without a widened copy of x or a pass of the squares' own (a decode step's rows).
    void (*gemm_f32_squares_rows)(const bf16* x, int64_t n, int64_t k, const float* fn, int64_t fn_rows, float* out,
                                  int64_t ldo, float* squares) = nullptr;
};
inline int64_t f32_pairs_stride(int64_t k) { return (k + 31) / 32 * 32; }
// x = hi + mid + lo exactly for every finite fp32 x whose parts stay normal (|x| >= ~2^-110): hi = x truncated to
// bf16, mid = the rest truncated, lo = the rest of that (at most 8 significant bits). Infinities and NaNs go to hi
// whole (NaN quieted), mid = lo = 0. Planes [n, k] each at out, out + n k, out + 2 n k; rows i0 .. i1 - 1 of x
// (a call's rows split over the pool).
void split_bf16x3_rows(const float* x, int64_t n, int64_t k, int64_t i0, int64_t i1, bf16* out);
// The widest hc the SIMD Sinkhorn keeps in registers (the released model has 4).
inline constexpr int kMaxSimdHc = 8;

// The routines of each ISA; which ones exist is decided by the CPU in cpu_tables.cpp.
const IsaOps& avx2_ops();
const IsaOps& avx512_ops();

#define DEEPINFER_DECLARE_ISA_OPS(ns)                                                                       \
    namespace ns {                                                                                          \
    void act_quant_rows(const bf16* x, int64_t k, uint8_t* codes, uint8_t* scales, int64_t r0, int64_t r1); \
    void decode_acts(const uint8_t* codes, const uint8_t* scales, int64_t n, int64_t k, void* values,       \
                     float* act_scales);                                                                    \
    void gemm_fp8(const QuantGemmTask& task);                                                               \
    void gemm_fp4(const QuantGemmTask& task);                                                               \
    void gemm_bf16(const DenseGemmTask& task);                                                              \
    void gemm_f32_bf16w(const DenseGemmTask& task);                                                         \
    void gemm_f32(const DenseGemmTask& task);                                                               \
    void sparse_attn(const SparseAttnTask& task);                                                           \
    void index_scores(const IndexScoresTask& task);                                                         \
    void index_scores_fp4(const IndexScoresFp4Task& task);                                                 \
    uint64_t read_stream(const uint8_t* p, size_t bytes, bool ahead);                                       \
    float fma_loop(int64_t iters);                                                                          \
    float dot_loop(int64_t iters);                                                                          \
    void rms_norm_rows(const bf16* x, int dim, const bf16* w, float eps, bf16* y, int64_t r0, int64_t r1);  \
    void swiglu_rows(const bf16* gate, const bf16* up, int inter, float limit, const float* row_weight,     \
                     bf16* h, int64_t r0, int64_t r1);                                                      \
    void rope(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin,     \
              bool inverse);                                                                                \
    void pair_pool(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out); \
    void hc_sinkhorn_rows(const float* mixes, const float* scale, const float* base, int hc, int iters,     \
                          float eps, float* pre, float* post, float* comb, int64_t r0, int64_t r1);         \
    void hc_collapse_rows(const bf16* x, const float* pre, int hc, int dim, bf16* y, int64_t r0, int64_t r1); \
    void hc_expand_rows(const bf16* o, const bf16* res, const float* post, const float* comb, int hc,       \
                        int dim, bf16* out, int64_t r0, int64_t r1);                                        \
    void order_keys(const float* scores, int64_t n, uint32_t* keys);                                        \
    int64_t select_entries(const uint32_t* keys, int64_t n, uint32_t threshold, int64_t ties, int32_t* out); \
    void gather_fp8_rows(const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows,         \
                         bf16* out, int64_t r0, int64_t r1);                                                \
    void unpack_records_rows(CacheRecord kind, const uint8_t* const* records, int dim, bf16* out, int64_t r0, \
                             int64_t r1);                                                                   \
    void gemm_f32_squares_tiles(const bf16* x, int64_t tiles, int64_t k, const float* fn, int64_t fn_rows,  \
                                float* out, int64_t ldo, float* squares);                                   \
    void gemm_f32_squares_rows(const bf16* x, int64_t n, int64_t k, const float* fn, int64_t fn_rows,       \
                               float* out, int64_t ldo, float* squares);                                    \
    }
DEEPINFER_DECLARE_ISA_OPS(avx2)
DEEPINFER_DECLARE_ISA_OPS(avx512)
#undef DEEPINFER_DECLARE_ISA_OPS
namespace avx512 {
bool fp8_bits_acts(const void* acts, int64_t n, int64_t k, bool e4m3, void* out);
int64_t fp8_bits_acts_bytes(int64_t n, int64_t k);
void gemm_f32_bf16w_tiles(const DenseGemmTask& task);  // gemm_head_amx.cpp
void gemm_bf16_tiles(const DenseGemmTask& task);       // gemm_bf16_amx.cpp
void bf16_pair_tiles(const bf16* x, int64_t n, int64_t k, int64_t p0, int64_t p1, bf16* out);  // gemm_bf16_amx.cpp
bool fp8_tile_acts(const void* acts, const float* act_scales, int64_t n, int64_t k, void* out,
                   int32_t* row_shift);  // gemm_fp8_amx.cpp
int64_t fp8_tile_item_rows();  // gemm_fp8_amx.cpp
bool fp4_tile_acts(const void* acts, const float* act_scales, const uint8_t* fp4_rows, int64_t row_bytes, int64_t n,
                   int64_t k, void* out, int32_t* row_shift);  // gemm_fp4_amx_sums.cpp
float tile_loop(int64_t iters);  // probe_amx.cpp
void gemm_f32_pairs_bf16w(const DenseGemmTask& task);                                  // gemm_dense_avx512.cpp
void f32_pair_rows(const float* x, int64_t k, int64_t i0, int64_t i1, float* out);     // gemm_dense_avx512.cpp
void prep_fp4_flags(const uint8_t* codes, int64_t k, uint8_t* out);  // fp4_flags_avx512.cpp
// The integer MXFP4 rows the AVX-512 GEMM of n rows reads: AVX2's planes, except from kFp4PanelMinRows rows
// without AMX, where it decodes each pair once per chunk of k for all rows (gemm_quant_avx512.cpp, run_panel).
int64_t fp4_row_bytes(int64_t k, int64_t n);
// Whether tdpbf16ps adds its products to C with one rounding, checked once per process on crafted products
// (gemm_fp4_amx_sums.cpp; only where amx_enabled()).
bool tile_unit_rounds_once();
}  // namespace avx512
namespace avx2 {
// AVX2's integer MXFP4 rows (the GEMV's planes, Fp4RowLayout, or the panel GEMM's words, Fp4PanelRow), and
// the planes for every n (the AVX-512 table's rows).
int64_t fp4_row_bytes(int64_t k, int64_t n);
void prep_fp4_row(const uint8_t* codes, int64_t k, int64_t n, uint8_t* out);
int64_t plane_row_bytes(int64_t k, int64_t n);
void prep_plane_row(const uint8_t* codes, int64_t k, int64_t n, uint8_t* out);
bool fp8_bits_acts(const void* acts, int64_t n, int64_t k, bool e4m3, void* out);
int64_t fp8_bits_acts_bytes(int64_t n, int64_t k);
}  // namespace avx2

}  // namespace deepinfer::backend::cpu
