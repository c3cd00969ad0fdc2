// The AVX-512 weight stream's pieces shared by its GEMMs on vdpbf16ps (gemm_quant_avx512.cpp) and on AMX tiles
// (gemm_amx.cpp, gemm_fp8_amx.cpp): the software prefetch of the stream, the fp8 bit-placing decode and the e2m1
// decode, and the AMX GEMMs' tile shapes.
#pragma once

#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

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
    if constexpr (kAhead.l1 > 0) __asm__ volatile("prefetcht0 %0" : : "m"(chunk[kAhead.l1]), DEEPINFER_ZMM(after));
    if constexpr (kAhead.l2 > 0) __asm__ volatile("prefetcht1 %0" : : "m"(chunk[kAhead.l2]), DEEPINFER_ZMM(after));
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

// The exponents of a row's nonzero |a sa| (a: decoded bf16 values [kb_count * 32], sa: its blocks' scales) as
// biased fields: the largest value lies in [2^(top - 127), 2^(top - 126)), the smallest nonzero one in
// [2^(bottom - 127), ...); top < bottom when none is nonzero. bf16 denormals count as zero (tdpbf16ps and
// vdpbf16ps read them so). ok: every scale a positive normal power of two and no value NaN or infinite.
struct RowExponents {
    bool ok;
    int top, bottom;
};
inline RowExponents row_exponents(const uint16_t* a, const float* sa, int64_t kb_count) {
    const __m512i field = _mm512_set1_epi16(0xff);
    bool ok = true;
    __m512i hi = _mm512_set1_epi16(SHRT_MIN), lo = _mm512_set1_epi16(SHRT_MAX);
    __mmask32 special = 0;
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        uint32_t s;
        std::memcpy(&s, sa + kb, 4);
        const int e = static_cast<int>(s >> 23);
        ok &= (s & 0x007fffffu) == 0 && e > 0 && e < 255;  // a positive normal power of two
        const __m512i f = _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(a + kb * 32), 7), field);
        const __mmask32 nonzero = _mm512_test_epi16_mask(f, f);
        special |= _mm512_cmpeq_epi16_mask(f, field);
        const __m512i x = _mm512_add_epi16(f, _mm512_set1_epi16(static_cast<short>(e - 127)));
        hi = _mm512_mask_max_epi16(hi, nonzero, hi, x);
        lo = _mm512_mask_min_epi16(lo, nonzero, lo, x);
    }
    alignas(64) int16_t his[32], los[32];
    _mm512_store_si512(his, hi);
    _mm512_store_si512(los, lo);
    RowExponents r{ok && special == 0, SHRT_MIN, SHRT_MAX};
    for (int j = 0; j < 32; ++j) r.top = std::max<int>(r.top, his[j]), r.bottom = std::min<int>(r.bottom, los[j]);
    return r;
}

// The AMX GEMMs' activations (fp8_tile_acts, fp4_tile_acts) are tile-blocked: the 16 rows of a row tile's block
// of 32 columns lie together, 1 KB, as one tileloadd reads them (stride 64). Row r's block kb begins at element
// tile_acts_at(r, kb, kb_count) (bf16 units). Why: rows k * 2 bytes apart made every A tile load gather 16 lines
// from 16 places in L2; a scratch loop of the products alone (64 rows, a pair of row groups, k = 1280-8192) ran
// 1.14-1.27x faster on blocked tiles (docs/PERFORMANCE.md, "Nineteenth session").
inline constexpr int64_t kTileBlockElems = 16 * 32, kTileBlockWords = kTileBlockElems / 2;
inline int64_t tile_acts_at(int64_t row, int64_t kb, int64_t kb_count) {
    return ((row / 16) * kb_count + kb) * kTileBlockElems + (row % 16) * 32;
}

// A row's a * sa * 2^shift in bf16 into its places in the tile-blocked out (row `row` of it; exact where
// row_exponents' window holds it); zeros and denormals to zero.
inline void fold_row_scales(const uint16_t* a, const float* sa, int64_t kb_count, int shift, uint16_t* out,
                            int64_t row) {
    const __m512i exponent = _mm512_set1_epi16(0x7f80);
    uint16_t* o = out + tile_acts_at(row, 0, kb_count);
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        uint32_t s;
        std::memcpy(&s, sa + kb, 4);
        const int d = static_cast<int>(s >> 23) - 127 + shift;
        const __m512i v = _mm512_loadu_si512(a + kb * 32);
        const __mmask32 nonzero = _mm512_test_epi16_mask(v, exponent);
        _mm512_store_si512(o + kb * kTileBlockElems,
                           _mm512_maskz_add_epi16(nonzero, v, _mm512_set1_epi16(static_cast<short>(d << 7))));
    }
}
// Row `row` of the tile-blocked out as zeros (a row outside the window: the per-block kernel takes it).
inline void zero_tile_row(uint16_t* out, int64_t row, int64_t kb_count) {
    uint16_t* o = out + tile_acts_at(row, 0, kb_count);
    for (int64_t kb = 0; kb < kb_count; ++kb) _mm512_store_si512(o + kb * kTileBlockElems, _mm512_setzero_si512());
}

// The smallest and largest of count scale codes.
struct ScaleCodeRange {
    int lo, hi;
};
inline ScaleCodeRange scale_code_range(const uint8_t* scales, int64_t count) {
    __m512i vlo = _mm512_set1_epi8(-1), vhi = _mm512_setzero_si512();
    for (int64_t i = 0; i < count; i += 64) {
        const __mmask64 valid = count - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (count - i)) - 1;
        vlo = _mm512_mask_min_epu8(vlo, valid, vlo, _mm512_maskz_loadu_epi8(valid, scales + i));
        vhi = _mm512_mask_max_epu8(vhi, valid, vhi, _mm512_maskz_loadu_epi8(valid, scales + i));
    }
    alignas(64) uint8_t los[64], his[64];
    _mm512_store_si512(los, vlo);
    _mm512_store_si512(his, vhi);
    ScaleCodeRange r{255, 0};
    for (int j = 0; j < 64; ++j) r.lo = std::min<int>(r.lo, los[j]), r.hi = std::max<int>(r.hi, his[j]);
    return r;
}

// The AMX GEMMs' ways around their windows (gemm_quant_avx512.cpp), both with another kernel whose results do not
// depend on the rows beside them either: the task's groups [g0, g0 + G) (a pair; blocks of block_bytes codes and
// scale_bytes scales per group) for every row, without the tile activations; and the task's rows whose tile_shift
// is kWideRow for every group -- gathered (values, scales and integer form), run and copied back.
void gemm_pair_apart(const QuantGemmTask& t, int64_t g0, int G, int64_t block_bytes, int64_t scale_bytes,
                     void (*kernel)(const QuantGemmTask&));
void gemm_wide_rows_apart(const QuantGemmTask& t, void (*kernel)(const QuantGemmTask&));

// MXFP4, once per task: per tile of 16 activation rows and block, the rows whose sums of the block are not exact
// (their integer form's kFp4SumsExact clear, Fp4RowLayout::exact), bit r for the tile's row r: out[tile][kb].
// (Worked out per pass and group instead, the byte loads, shifts and ors took ~10% of a 64-row GEMM in cache.)
inline void inexact_rows(const QuantGemmTask& t, uint16_t* out) {
    const int64_t kb_count = t.k / 32;
    const Fp4RowLayout layout = fp4_row_layout(kb_count);
    for (int64_t i0 = 0; i0 < t.n; i0 += kMaxTileRows) {
        uint16_t* tile = out + i0 / kMaxTileRows * kb_count;
        for (int64_t kb = 0; kb < kb_count; ++kb) tile[kb] = 0;
        for (int64_t r = 0; r < kMaxTileRows && i0 + r < t.n; ++r) {
            const uint8_t* exact = t.fp4_row + (i0 + r) * layout.bytes + layout.exact;
            for (int64_t kb = 0; kb < kb_count; ++kb)
                tile[kb] |= static_cast<uint16_t>(((exact[kb] & kFp4SumsExact) == 0) << r);
        }
    }
}

// The sums of m activation rows from row i0 and group g (16 weight rows each, at acc) to the task's output (the MXFP4
// AMX kernels). Rows whose tile_shift is kWideRow are left to gemm_wide_rows_apart.
inline void store_rows(const QuantGemmTask& t, const float* acc, int m, int64_t i0, int64_t g) {
    const __mmask16 mask = lane_mask(t.rows - g * 16);
    for (int r = 0; r < m; ++r) {
        if (t.tile_shift && t.tile_shift[i0 + r] == kWideRow) continue;
        const __m512 v = _mm512_load_ps(acc + r * 16);
        const int64_t at = (i0 + r) * t.ldo + g * 16;
        if (t.out_f32) store_row(t.out_f32 + at, mask, v);
        else store_row(t.out + at, mask, v);
    }
}

// The fp8 and MXFP4 GEMMs on AMX tiles (CPUs where core/cpu_features.h amx_enabled()). fp8 (gemm_fp8_amx.cpp):
// every row count, so that a row's result does not depend on its batch, with the activations of fp8_tile_acts
// (QuantGemmTask::tile_acts). MXFP4 (gemm_amx.cpp): 5 and more rows with their integer form
// (QuantGemmTask::fp4_row), whose flags tell the blocks that the tiles sum exactly from those that take the
// vdpbf16ps chain the integer kernel falls back to (the same bits as 1-4 rows get).
void gemm_fp8_amx(const QuantGemmTask& t);
void gemm_fp4_amx(const QuantGemmTask& t);
// MXFP4 with the sums over all of k in the tiles (gemm_fp4_amx_sums.cpp): 5 and more rows with the activations of
// fp4_tile_acts (QuantGemmTask::tile_acts), the same bits as gemm_fp4_amx.
void gemm_fp4_amx_sums(const QuantGemmTask& t);
}  // namespace deepinfer::backend::cpu::avx512
