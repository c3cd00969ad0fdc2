// What the AVX2 panel GEMM of MXFP4 on integers shares between its forms (gemm_fp4_int_avx2.cpp: PlainAvx2 and
// AvxVnni on ymm; gemm_fp4_zmm_avx2.cpp: EvexVnni on zmm): the decoded row group's panel in the task's scratch, the
// exponent range of its scales, and a row's block finished on ymm (lows, the fp32 chain, the scaling). AVX2
// translation units only. Why the integer sums are the fp32 kernel's bits: gemm_fp4_int_avx2.cpp.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/avx2/fp4_chunk.h"

namespace deepinfer::backend::cpu::avx2 {

// What a tile of the EvexVnni form checks once per block for all of its rows: the least e and greatest e + unit_e of
// its rows (exponent_scaled's checks; e taken as 0 where a row's block runs the chain), and its rows whose block has
// lows (bit r).
struct TileKey {
    int32_t lo, hi, lows, unused;
};

// Where the scratch holds the decoded row group (after the kActRowChunk x 16 accumulators).
struct Panels {
    uint8_t* codes;  // [k / 32][chunk c][lo rows 0-7, lo rows 8-15, hi rows 0-7, hi rows 8-15][32]: Fp4Chunk::to_int8
    float* sw;       // [k / 32][16]: the block scales times Fp4Chunk::kValueScale
    int32_t* sw_exponents;  // [k / 32][16]: bits(sw) - kExponentBias, for scale_by_exponents
    // The EvexVnni form's tiles of kZmmTileRows activation rows (tile_scales_of): per tile and block, each row's
    // bits(sa) + bits(unit) (scale_by_exponents' sa_unit) and TileKey.
    int32_t* sa_unit;   // [tile][k / 32][kZmmTileRows]
    TileKey* tile_keys;  // [tile][k / 32]
};
// What scale_by_exponents subtracts from the sum of three powers' bits (the block scale, the row's unit times 2^-8
// and the activation scale): the biases of two exponents and the 8 of the 256.
inline constexpr auto kExponentBias = static_cast<int32_t>(uint32_t{127 + 127 + 8} << 23);  // (wraps to negative)
// Bytes of a block in Panels::codes.
inline constexpr int64_t kPanelBlockBytes = 512;
// Activation rows of the EvexVnni form's tiles (tile_zmm).
inline constexpr int kZmmTileRows = 8;

// Panel `slot` (0, or 1 for the EvexVnni form's second: it decodes the next group into it while the current one's
// tiles run), 5 k floats each; the tile scales after both (2 k + k floats for up to kActRowChunk rows): 13 k floats
// past the accumulators, within the task's scratch (isa_ops.h gemm_scratch_floats: 24 k and more).
inline Panels panels_of(const QuantGemmTask& t, int slot) {
    float* base = t.scratch + kActRowChunk * 16;
    float* panel = base + slot * 5 * t.k;
    Panels p;
    p.codes = reinterpret_cast<uint8_t*>(panel);
    p.sw = panel + t.k / 32 * kPanelBlockBytes / 4;
    p.sw_exponents = reinterpret_cast<int32_t*>(p.sw + t.k / 2);
    p.sa_unit = reinterpret_cast<int32_t*>(base + 2 * 5 * t.k);
    p.tile_keys = reinterpret_cast<TileKey*>(p.sa_unit + kActRowChunk * (t.k / 32));
    return p;
}

// Which activation scales a group's blocks take by exponent arithmetic (scale_by_exponents): those whose
// biased exponent e, and e + that of the row's unit times 2^-8 (2^-8 * 2^(e0 + 14)), lie in [lo, hi], which
// keeps every product of the reference's scaling in the normal range. None where a block scale is not a normal
// power of two (scale codes 0-25 or 255).
struct ExponentRange {
    int32_t lo = 1, hi = 0;
};

// The range of a group whose scales times f have biased exponents from smallest to largest.
inline ExponentRange exponent_range(const QuantGemmTask& t, int32_t smallest, int32_t largest) {
    if (!t.plain_scales || smallest < 1 || largest > 254) return {};
    // e + (scale exponent - 127) in [1, 254] for every scale of the group
    return {std::max(1, 128 - smallest), std::min(254, 381 - largest)};
}

// The fp32 panel kernel's block partial for one row (gemm_quant_avx2.cpp panel_tile): FMAs in column order, on the
// columns Fp4Chunk decodes (2^25 w), made from the block's panel.
inline __attribute__((noinline)) void chain_block(const uint8_t* block, const float* a, __m256& p0, __m256& p1) {
    __m256 q0 = _mm256_setzero_ps(), q1 = q0;
#pragma GCC unroll 1
    for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
        const auto* v = reinterpret_cast<const __m256i*>(block + c * 128);
        Fp4Chunk::columns(_mm256_load_si256(v), _mm256_load_si256(v + 2), _mm256_load_si256(v + 1),
                          _mm256_load_si256(v + 3), [&](int j, __m256 col0, __m256 col1) {
                              const __m256 x = _mm256_broadcast_ss(a + c * Fp4Chunk::kCols + j);
                              q0 = _mm256_fmadd_ps(col0, x, q0);
                              q1 = _mm256_fmadd_ps(col1, x, q1);
                          });
    }
    p0 = q0;
    p1 = q1;
}

// The pair of columns q (2q, 2q + 1) of a block's panel, times 256, as int16 pairs (w0: rows 0-7, w1: rows 8-15).
inline void panel_pair(const uint8_t* block, int q, __m256i& w0, __m256i& w1) {
    // pair q = 4c + i: chunk c's low-nibble vectors for i = 0 (shifted) and 2 (masked), high-nibble ones for 1 and 3
    const auto* v = reinterpret_cast<const __m256i*>(block + q / 4 * 128 + (q % 2) * 64);
    const __m256i x0 = _mm256_load_si256(v), x1 = _mm256_load_si256(v + 1);
    if (q % 4 < 2) {
        w0 = _mm256_slli_epi16(x0, 8);
        w1 = _mm256_slli_epi16(x1, 8);
    } else {
        const __m256i high = _mm256_set1_epi16(static_cast<int16_t>(0xff00));
        w0 = _mm256_and_si256(x0, high);
        w1 = _mm256_and_si256(x1, high);
    }
}

// A panel row's block kb: the mask of its pairs of columns with lows (Fp4PanelRow::lo_pairs), and pair q's lows as
// one int32 (two int16).
inline uint32_t low_pairs(const uint8_t* row, const Fp4PanelRow& panel, int64_t kb) {
    uint16_t mask;
    std::memcpy(&mask, row + panel.lo_pairs + 2 * kb, 2);
    return mask;
}
inline int32_t low_pair(const uint8_t* row, const Fp4PanelRow& panel, int64_t kb, int q) {
    int32_t pair;
    std::memcpy(&pair, row + panel.lows + 64 * kb + 4 * q, 4);
    return pair;
}

// Row r's block sum from its int32 sums (s0: rows 0-7, s1: rows 8-15) as floats: 256 times the integer sum of
// the block's products (the words' and their lows', kept apart: 256 * the block's sum may pass 2^31; as floats both
// sums and their total are exact, 256 * |sum| < 2^32 with at most 24 significant bits).
inline void joined_sums(const uint8_t* row, const Fp4PanelRow& panel, const uint8_t* block, int64_t kb, int shift,
                        __m256i s0, __m256i s1, __m256& f0, __m256& f1) {
    f0 = _mm256_cvtepi32_ps(s0);
    f1 = _mm256_cvtepi32_ps(s1);
    if (shift == 0) return;
    // v = (words << shift) + lows, the lows in few pairs (the small values of a wide block)
    __m256i l0 = _mm256_setzero_si256(), l1 = l0;
    for (uint32_t m = low_pairs(row, panel, kb); m != 0; m &= m - 1) {
        const int q = std::countr_zero(m);
        const __m256i x = _mm256_set1_epi32(low_pair(row, panel, kb, q));
        __m256i w0, w1;
        panel_pair(block, q, w0, w1);
        l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(w0, x));
        l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(w1, x));
    }
    const __m256 times = _mm256_set1_ps(static_cast<float>(1 << shift));
    f0 = _mm256_fmadd_ps(f0, times, _mm256_cvtepi32_ps(l0));
    f1 = _mm256_fmadd_ps(f1, times, _mm256_cvtepi32_ps(l1));
}

// acc[16] += f * (sw * 2^-8 * unit * sa) for a row's joined sums f, with the three powers' product made by adding
// their bits (sa_unit: bits(sa) + bits(unit)) to the block's sw_exponents: two vpaddd for the three vmulps of
// the reference's scaling (p = S * unit, then scale_into's p * ((sw * f) * sa)), which share the multiplier with
// vpdpwssd (8 vpdpwssd and 4 vmulps: 6 cycles where 8 alone take 4, Zen 5). The same bits: where ExponentRange
// admits the row, each of those products is exact (a power of two times a normal float, normal), so one fma of
// f by sw * 2^-8 * unit * sa rounds the same exact product as the reference's.
inline void scale_by_exponents(float* acc, __m256 f0, __m256 f1, __m256i sw_exponents0, __m256i sw_exponents1,
                               int32_t sa_unit) {
    const __m256i c = _mm256_set1_epi32(sa_unit);
    const __m256 y0 = _mm256_castsi256_ps(_mm256_add_epi32(c, sw_exponents0));
    const __m256 y1 = _mm256_castsi256_ps(_mm256_add_epi32(c, sw_exponents1));
    _mm256_store_ps(acc, _mm256_fmadd_ps(f0, y0, _mm256_load_ps(acc)));
    _mm256_store_ps(acc + 8, _mm256_fmadd_ps(f1, y1, _mm256_load_ps(acc + 8)));
}

// Whether a row's block kb (activation scale sa) is scaled by exponent arithmetic (scale_by_exponents: ExponentRange
// admits its scale and unit), and then the bits it adds to the block scale's exponents: bits(sa) + bits(unit).
__attribute__((always_inline)) inline bool exponent_scaled(const uint8_t* row, const Fp4PanelRow& panel, int64_t kb,
                                                           float sa, const ExponentRange& range, int32_t& sa_unit) {
    int32_t unit;
    std::memcpy(&unit, row + panel.unit + 4 * kb, 4);
    const auto sa_bits = std::bit_cast<uint32_t>(sa);
    const auto e = static_cast<int32_t>(sa_bits >> 23 & 0xff);
    const int32_t unit_e = (unit >> 23) - 135;  // (unit * 2^-8 = 2^unit_e, >= 2^7)
    sa_unit = static_cast<int32_t>(sa_bits + static_cast<uint32_t>(unit));  // (wraps)
    return e >= range.lo && e + unit_e <= range.hi;
}

// Row i0 + r's partial of block kb from its int32 sums (s0: rows 0-7 of the group, s1: rows 8-15), scaled into its
// accumulators acc[16] (L1): the joined sums, or the block's fp32 chain where the row's shift says so.
__attribute__((always_inline)) inline void finish_row(const QuantGemmTask& t, const Panels& pn,
                                                      const ExponentRange& range, int64_t i0, int64_t kb, int r,
                                                      __m256i s0, __m256i s1, float* acc) {
    const int64_t kb_count = t.k / 32;
    const Fp4PanelRow panel = fp4_panel_row(kb_count);
    const uint8_t* row = t.fp4_row + (i0 + r) * panel.bytes;
    const uint8_t* block = pn.codes + kb * kPanelBlockBytes;
    const __m256 sw0 = _mm256_load_ps(pn.sw + kb * 16), sw1 = _mm256_load_ps(pn.sw + kb * 16 + 8);
    const int shift = row[panel.shift + kb];
    const float sa = t.act_scales[(i0 + r) * kb_count + kb];
    __m256 p0, p1;
    if (shift == kChainBlock) {
        chain_block(block, static_cast<const float*>(t.acts) + (i0 + r) * t.k + kb * 32, p0, p1);
        scale_into(acc, p0, p1, sw0, sw1, sa);
        return;
    }
    joined_sums(row, panel, block, kb, shift, s0, s1, p0, p1);
    int32_t sa_unit;
    if (exponent_scaled(row, panel, kb, sa, range, sa_unit)) {
        const auto* exponents = reinterpret_cast<const __m256i*>(pn.sw_exponents + kb * 16);
        scale_by_exponents(acc, p0, p1, _mm256_load_si256(exponents), _mm256_load_si256(exponents + 1), sa_unit);
        return;
    }
    int32_t unit;
    std::memcpy(&unit, row + panel.unit + 4 * kb, 4);
    const __m256 u = _mm256_set1_ps(std::bit_cast<float>(unit) * 0x1p-8f);  // (exact: a power of two)
    scale_into(acc, _mm256_mul_ps(p0, u), _mm256_mul_ps(p1, u), sw0, sw1, sa);
}

// Panels::sa_unit and tile_keys of the task's rows, once per task (gemm_fp4_int_avx2.cpp).
void tile_scales_of(const QuantGemmTask& t, const Panels& pn);

// The EvexVnni form's panel GEMM (gemm_fp4_zmm_avx2.cpp), for gemm_fp4_int.
void gemm_fp4_int_zmm(EvexVnni, const QuantGemmTask& t);

}  // namespace deepinfer::backend::cpu::avx2
