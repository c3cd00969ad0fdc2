// Packed weight layouts of the CPU GEMMs (PackedLayout in backend/kernels.h) and their scalar packers.
// Both layouts put 16 consecutive output rows in the 16 fp32 lanes of a register ("lanes = rows"), so a
// kernel forms each 32-column block product of 16 rows at once without horizontal sums, and can apply
// the block's scale before moving to the next block (spec §4.3 order). They are permutations of the
// checkpoint bytes (same size, rows padded to a multiple of 16); AVX2 and AVX-512 read the same layout.
//
// kFp8R16K4 (fp8 e4m3 + 32x32 e8m0), G = ceil(rows/16) groups, KB = cols/32 blocks:
//   codes  [G][KB][8 chunks][64 bytes]; chunk c of block kb holds columns 32kb + 4c + {0..3} of the
//          group's 16 rows: byte 16L + 8h + 2d + e = code[16g + 4L + d][32kb + 4c + 2h + e]
//          (L, d in 0..3; h, e in 0..1). A 512-bit unpacklo/unpackhi of the decoded low/high bf16 bytes
//          then yields, in dword lane r, the column pairs (4c, 4c+1) and (4c+2, 4c+3) of row r.
//   scales [G][KB] bytes = scale[16g / 32][kb] (the block's e8m0 scale), after all codes.
//   flags  [G][KB] bytes, indexed as the scales, after them (prepare_fp8 only, not per-call packing): nonzero
//          when the group's 16x32 block holds a subnormal code (exponent 0, mantissa != 0), which the AVX-512
//          bit-placing decode cannot represent (gemm_quant_avx512.cpp).
// kFp4R16K8 (MXFP4 + 1x32 e8m0):
//   codes  [G][KB][4 chunks][64 bytes]; chunk c of block kb holds columns 32kb + 8c + {0..7}. Read as 32
//          little-endian 16-bit words: nibble q (bits 4q..4q+3) of word 2r + e = e2m1 code of
//          [16g + r][32kb + 8c + 2q + e]. Shifting the words by 4q and looking the low 5 bits up in a
//          32-entry table gives, in dword lane r, the bf16 column pair (8c + 2q, 8c + 2q + 1) of row r.
//   scales [G][KB][16] bytes = scale[16g + r][kb], after all codes.
// The [G][KB][chunk] orders above are each group's logical order. In memory, row groups are stored in pairs
// (packed_group in x86/isa_ops.h): codes [G/2][KB][chunk][2 groups][64 bytes] -- block kb of pair p holds the
// chunks of groups 2p and 2p + 1 alternately (chunk c of group 2p + e at 128 c + 64 e) -- and scales
// [G/2][KB][2 groups][1 or 16 bytes]; a trailing odd group is alone ([KB][chunk][64 bytes]). A decode kernel
// runs both groups of a pair (two independent accumulation chains) and so reads one sequential code stream
// and one scale stream instead of four. Streamed from memory at n = 1 (A/B alternating in one process), that
// gained 10-14% on wq_b and expert w2 (short rows: a group's stream was 18-20 KB), 5-7% on expert w1, 0-4%
// on wo_b; interleaving whole 512-byte fp8 blocks instead of 64-byte chunks lost 25-45%.
// Padding rows have zero codes and scale 127 (1.0).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cpu/x86/isa_ops.h"
#include "backend/kernels.h"

namespace deepinfer::backend::cpu {

inline constexpr int kGroupRows = 16;
inline constexpr int64_t kFp8BlockBytes = 512;  // one 16x32 block of fp8 codes
inline constexpr int64_t kFp4BlockBytes = 256;  // one 16x32 block of fp4 codes

inline int64_t row_groups(int64_t rows) { return (rows + kGroupRows - 1) / kGroupRows; }

// Bytes of the packed codes and scales of `groups` row groups of a weight with `cols` columns.
inline int64_t fp8_packed_code_bytes(int64_t groups, int64_t cols) { return groups * kGroupRows * cols; }
inline int64_t fp8_packed_scale_bytes(int64_t groups, int64_t cols) { return groups * (cols / 32); }
inline int64_t fp4_packed_code_bytes(int64_t groups, int64_t cols) { return groups * kGroupRows * cols / 2; }
inline int64_t fp4_packed_scale_bytes(int64_t groups, int64_t cols) { return groups * kGroupRows * (cols / 32); }

// Pack row groups [g0, g1) of a canonical weight (g0 even; g1 even or the last group) into codes_dst and
// scales_dst, laid out as a packed weight of g1 - g0 groups.
void pack_fp8_groups(const Fp8Matrix& w, int64_t g0, int64_t g1, uint8_t* codes_dst, uint8_t* scales_dst);
void pack_fp4_groups(const Fp4Matrix& w, int64_t g0, int64_t g1, uint8_t* codes_dst, uint8_t* scales_dst);

// The prepare_fp8 / prepare_fp4 entries of the SIMD tables: the whole weight, row groups split over the pool.
void prepare_fp8(const Fp8Matrix& w, PackedWeight* out, ThreadPool& pool);
void prepare_fp4(const Fp4Matrix& w, PackedWeight* out, ThreadPool& pool);

// kBf16Tiles (cols % 32 == 0): row group g's block kb (32 columns) is the 1 KB tile at (g * cols / 32 + kb) * 1024,
// laid out as the B operand of tdpbf16ps: dword [t][r] (t < 16 column pairs, r < 16 rows) = the bf16 pair
// (w[16 g + r][32 kb + 2 t], w[16 g + r][32 kb + 2 t + 1]); rows past the last are zero.
inline constexpr int64_t kBf16TileBytes = 1024;
inline int64_t bf16_tiles_bytes(int64_t rows, int64_t cols) { return row_groups(rows) * (cols / 32) * kBf16TileBytes; }
void prepare_bf16_tiles(const Bf16Matrix& w, PackedWeight* out, ThreadPool& pool);

}  // namespace deepinfer::backend::cpu
