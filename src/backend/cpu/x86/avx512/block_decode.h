// The AVX-512 weight stream's pieces shared by its GEMMs on vdpbf16ps (gemm_quant_avx512.cpp) and on AMX tiles
// (gemm_amx.cpp, gemm_fp8_amx.cpp): the software prefetch of the stream, the fp8 bit-placing decode and the e2m1
// decode, and the AMX GEMMs' tile shapes.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"
#include "backend/cpu/x86/x86_tables.h"

namespace deepinfer::backend::cpu::avx512 {

// Software prefetch distances of a weight stream, bytes ahead of the chunk being decoded (0: none).
struct Prefetch {
    int64_t l1, l2;
};

// The AMX GEMMs' tiles (gemm_amx.cpp, gemm_fp8_amx.cpp): activation rows per A tile, and the column pairs of a
// 32-column block, the B tile's rows.
inline constexpr int kMaxTileRows = 16, kBlockPairs = 16;
// Their prefetch plans of the stream by activation rows, those of the vdpbf16ps kernel on non-Zen-4 CPUs (the only
// ones with AMX): 1-2 rows 6 KB into L2, more 1.5 KB into L1 plus 12 KB into L2 (gemm_quant_avx512.cpp). For
// n = 1, 3-24 KB into L2, with or without 0.5-4 KB into L1, all ran within noise of it (one core, streamed).
inline constexpr Prefetch kFewRowsAhead{0, 6144}, kManyRowsAhead{1536, 12288};

// The prefetches take the chunk's decoded or loaded vector `after` as an input they do not read: that keeps each
// one beside its chunk, as the kernels issue them. Without it GCC hoisted a block's eight prefetches into one burst
// at the block's start, and on an Intel Xeon (AVX-512 with AMX, 2-vCPU VM, ~16 GB/s per core) fp8 n = 1 read
// 71-73% of the bandwidth against 83-98% one per chunk (stream_rows' notes).
template <Prefetch kAhead>
inline void prefetch_ahead(const uint8_t* chunk, __m512i after) {
    if constexpr (kAhead.l1 > 0) __asm__ volatile("prefetcht0 %0" : : "m"(chunk[kAhead.l1]), "v"(after));
    if constexpr (kAhead.l2 > 0) __asm__ volatile("prefetcht1 %0" : : "m"(chunk[kAhead.l2]), "v"(after));
}

// Decoders of one 64-byte chunk into kVectors registers: vector q holds, in dword lane r, the bf16 pair
// of columns (2 t, 2 t + 1) of row r with t = kVectors * chunk + q (packing.h).
// Each decoder carries the software prefetch plan of its stream, by activation row count (gemm_quant_avx512.cpp).
// fp8 weights are decoded one of two ways, chosen per 16x32 block of a group:
// - Fp8Bits, for 1-4 activation rows, on blocks without subnormal codes (prepare_fp8 flags them) of weights
//   without NaN codes: the code's bits placed as bf16 bits, no table lookup. An unpack with zero puts each code
//   in the top byte of a 16-bit word (the same word order as the lookup's unpacks); an arithmetic shift by 4
//   and a mask leave the sign on bit 15, exponent e on the bf16 exponent field as is and the mantissa below it:
//   the bf16 value w * 2^-120, exact for every normal code and for zero (a subnormal code would become a bf16
//   denormal, which vdpbf16ps reads as zero). The activations come scaled by 2^64 (fp8_bits_acts), so each
//   product is w a 2^-56 and the block's partial sum -- every term and partial sum in fp32's normal range --
//   is the lookup's times 2^-56 exactly; multiplying it by 2^56 gives that sum bit for bit.
// - Fp8ToBf16 (two 128-entry byte lookups, exact for every code) for every other block.
// The lookups (vpermi2b) share Zen 4's execution ports with vdpbf16ps, unpacks, shifts and masks much less:
// a standalone n = 1 loop took 5.9 cycles per 64-byte chunk with the lookups, 4.8 with the bits.
struct Fp8Bits {
    const __m512i keep = _mm512_set1_epi16(static_cast<short>(0x87f0));  // sign, exponent e, mantissa
    inline void decode(const uint8_t* p, __m512i* v) const {
        const __m512i x = _mm512_load_si512(p), zero = _mm512_setzero_si512();
        v[0] = _mm512_and_si512(_mm512_srai_epi16(_mm512_unpacklo_epi8(zero, x), 4), keep);
        v[1] = _mm512_and_si512(_mm512_srai_epi16(_mm512_unpackhi_epi8(zero, x), 4), keep);
    }
};

// e2m1 -> bf16 of one 64-byte MXFP4 chunk (packing.h): vector q holds, in dword lane r, the bf16 column pair
// (8c + 2q, 8c + 2q + 1) of row r: one shift and one 32-entry word permute per vector.
struct Fp4ToBf16 {
    __m512i lut = _mm512_load_si512(tables::kE2M1Bf16x2.v);
    inline void decode(const uint8_t* p, __m512i* v) const {
        const __m512i x = _mm512_load_si512(p);
        v[0] = _mm512_permutexvar_epi16(x, lut);
        v[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 4), lut);
        v[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 8), lut);
        v[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 12), lut);
    }
};

// One group's MXFP4 block decoded whole (its 4 chunks chunk_stride bytes apart): v[t] holds the column pair t.
inline void decode_fp4_block(const Fp4ToBf16& dec, const uint8_t* block, int64_t chunk_stride, __m512i (&v)[16]) {
#pragma GCC unroll 4
    for (int ch = 0; ch < 4; ++ch) dec.decode(block + ch * chunk_stride, v + 4 * ch);
}

// The block's partial sums of one activation row (its 16 bf16 pairs of the block at a) by one vdpbf16ps chain over
// the column pairs in order: the integer MXFP4 kernel's fallback for blocks its form cannot hold, and what the AMX
// kernel takes for those blocks (the two must give the same bits).
inline __m512 fp4_block_chain(const __m512i (&v)[16], const uint32_t* a) {
    __m512 p = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int tp = 0; tp < 16; ++tp) p = dot_bcast(p, v[tp], a + tp);
    return p;
}

// The fp8 and MXFP4 GEMMs on AMX tiles (CPUs where core/cpu_features.h amx_enabled()). fp8 (gemm_fp8_amx.cpp):
// every row count, so that a row's result does not depend on its batch, with the activations of fp8_tile_acts
// (QuantGemmTask::tile_acts). MXFP4 (gemm_amx.cpp): 5 and more rows with their integer form
// (QuantGemmTask::fp4_row), whose flags tell the blocks that the tiles sum exactly from those that take the
// vdpbf16ps chain the integer kernel falls back to (the same bits as 1-4 rows get).
void gemm_fp8_amx(const QuantGemmTask& t);
void gemm_fp4_amx(const QuantGemmTask& t);
// The fp8 GEMM on vdpbf16ps (gemm_quant_avx512.cpp): CPUs without AMX, and the rows and pairs gemm_fp8_amx cannot
// take.
void gemm_fp8_vdpbf16ps(const QuantGemmTask& t);
}  // namespace deepinfer::backend::cpu::avx512
