// Helpers shared by the AVX-512 kernel TUs (all built with the AVX-512 flags of src/backend/CMakeLists.txt).
// Everything lives in namespace avx512 so no symbol is shared with code built for another ISA.
#pragma once

#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/x86_tables.h"
#include "core/numeric.h"

namespace deepinfer::backend::cpu::avx512 {

// fp32 -> bf16 bits with round-to-nearest-even and quiet NaNs, bit-identical to numeric.h float_to_bf16
// (vcvtneps2bf16 flushes denormals, so integer arithmetic is used instead).
inline __m256i to_bf16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
}

// A row of 16 output lanes (mask: the valid ones), rounded to bf16 or as fp32.
inline void store_row(bf16* out, __mmask16 mask, __m512 v) { _mm256_mask_storeu_epi16(out, mask, to_bf16(v)); }
inline void store_row(float* out, __mmask16 mask, __m512 v) { _mm512_mask_storeu_ps(out, mask, v); }
// 32 fp32 sums (lo then hi) rounded to bf16 as one 64-byte line, stored non-temporally: out 64-byte aligned; no read
// of the line first. The caller fences (sfence) before its results are handed over.
inline void stream_line(bf16* out, __m512 lo, __m512 hi) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(out),
                        _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(lo)), to_bf16(hi), 1));
}

// A kernel scratch buffer's first 64-byte boundary (the drivers reserve 64 bytes of slack).
inline uint8_t* align64(void* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~static_cast<uintptr_t>(63));
}

// bf16 -> fp32 (exact).
inline __m512 from_bf16(__m256i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)); }

// 16 e8m0 bytes -> fp32 (2^(b-127), b = 0 -> 2^-127, b = 255 -> NaN).
inline __m512 e8m0_to_ps(__m128i bytes) {
    const __m512i b = _mm512_cvtepu8_epi32(bytes);
    __m512i bits = _mm512_slli_epi32(b, 23);
    bits =
        _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
    bits =
        _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7fc00000));
    return _mm512_castsi512_ps(bits);
}

inline float e8m0_to_float(uint8_t b) { return tables::kE8M0.v[b]; }

// e4m3 -> bf16 by two 128-entry byte permutes (high and low byte of the bf16 pattern of the magnitude)
// plus the sign bit: exact for every code, subnormals and NaN included.
struct Fp8ToBf16 {
    __m512i hi0, hi1, lo0, lo1, sign;
    Fp8ToBf16()
        : hi0(_mm512_load_si512(tables::kE4M3Bf16Hi.v)),
          hi1(_mm512_load_si512(tables::kE4M3Bf16Hi.v + 64)),
          lo0(_mm512_load_si512(tables::kE4M3Bf16Lo.v)),
          lo1(_mm512_load_si512(tables::kE4M3Bf16Lo.v + 64)),
          sign(_mm512_set1_epi8(static_cast<char>(0x80))) {}
    // 64 codes -> bf16 words in unpack order: a = bytes 0-7 of each 128-bit lane, b = bytes 8-15.
    inline void decode(__m512i codes, __m512i& a, __m512i& b) const { lookup(hi0, hi1, lo0, lo1, sign, codes, a, b); }
    // ... with the given tables of the high and low bytes (these, or copies with an exponent offset folded in)
    static inline void lookup(__m512i h0, __m512i h1, __m512i l0, __m512i l1, __m512i sign, __m512i codes, __m512i& a,
                              __m512i& b) {
        __m512i hi = _mm512_permutex2var_epi8(h0, codes, h1);
        const __m512i lo = _mm512_permutex2var_epi8(l0, codes, l1);
        hi = _mm512_ternarylogic_epi32(hi, codes, sign, 0xf8);  // hi | (codes & sign)
        a = _mm512_unpacklo_epi8(lo, hi);
        b = _mm512_unpackhi_epi8(lo, hi);
    }
};

// Transpose a 16x16 matrix of dwords held in 16 registers (row r in r[r]) in place.
inline void transpose16(__m512i (&r)[16]) {
    __m512i t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    // r[4a + b] now holds, in 128-bit lane L, element b of rows 4L'.. for column block a: combine lanes.
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

// acc += w . broadcast(*pair) (bf16 pairs). The broadcast is an embedded-broadcast memory operand of
// vdpbf16ps: for the intrinsic form (_mm512_set1_epi32 + _mm512_dpbf16_ps) GCC 12 emits a separate
// vpbroadcastd, an extra vector uop per dot product (measured: +5-8% on the decode GEMVs without it).
inline __m512 dot_bcast(__m512 acc, __m512i w, const uint32_t* pair) {
#ifdef DEEPINFER_EMULATE_AVX512
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)_mm512_set1_epi32(static_cast<int>(*pair)));
#else
    __asm__("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*pair));
    return acc;
#endif
}

// acc += u8 x s8 dot products of 4 bytes per dword lane against the broadcast dword *x (embedded broadcast,
// as dot_bcast; the accumulator tied to the destination, where the intrinsic let GCC 12 copy it each time).
inline __m512i dpbusd_bcast(__m512i acc, __m512i u, const int32_t* x) {
#ifdef DEEPINFER_EMULATE_AVX512
    return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(*x));
#else
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*x));
    return acc;
#endif
}

// w * broadcast(*x) (fp32), the broadcast an embedded memory operand of vmulps: for _mm512_mul_ps(w, _mm512_set1_ps(*x))
// GCC 12 emitted a separate vbroadcastss in the fp32 GEMM's tile (gemm_dense_avx512.cpp f32_ordered_tile).
inline __m512 mul_bcast(__m512 w, const float* x) {
#ifdef DEEPINFER_EMULATE_AVX512
    return _mm512_mul_ps(w, _mm512_set1_ps(*x));
#else
    __m512 product;
    __asm__("vmulps %2%{1to16%}, %1, %0" : "=v"(product) : "v"(w), "m"(*x));
    return product;
#endif
}

inline __mmask16 lane_mask(int64_t valid) {
    return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1u);
}

// expf to about 1 ulp (Cephes polynomial on [-ln2/2, ln2/2], scaling by vscalefps, which also produces
// the subnormal / zero / infinite results). NaN stays NaN, -inf gives 0.
inline __m512 exp_ps(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));  // NaN passes
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

// exp_ps on 8 lanes: the same operations (AVX-512VL forms), so the same bits lane by lane.
inline __m256 exp_ps8(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
    const __m256 n = _mm256_roundscale_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    return _mm256_scalef_ps(p, n);
}

// Round fp32 lanes to the nearest bf16 value (as numeric.h round_to_bf16), kept as fp32.
inline __m512 round_bf16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    r = _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
    return _mm512_castsi512_ps(r);
}

// One indexer head's term of the scores of 16 x 4 keys, added in head order (spec §5.3.5; attention_avx512.cpp and
// index_fp4_avx512.cpp): total += bf16(relu(bf16(dot)) * w).
inline void add_head_scores(__m512 (&total)[4], const __m512 (&dot)[4], uint16_t w_bits) {
    const uint32_t bits = static_cast<uint32_t>(w_bits) << 16;
    float wf;
    __builtin_memcpy(&wf, &bits, 4);
    const __m512 wv = _mm512_set1_ps(wf);
#pragma GCC unroll 16
    for (int g = 0; g < 4; ++g) {
        const __m512 relu = _mm512_max_ps(_mm512_setzero_ps(), round_bf16(dot[g]));  // NaN passes
        total[g] = _mm512_add_ps(total[g], round_bf16(_mm512_mul_ps(relu, wv)));
    }
}

// 16 rows x 32 bf16 (64 bytes each, row r at base + r * stride elements; rows >= valid read as zero)
// transposed so out[c] holds the column pair (2c, 2c + 1) of row r in lane r.
inline void load_pairs_transposed(const uint16_t* base, int64_t stride, int valid, __m512i (&out)[16]) {
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) out[r] = r < valid ? _mm512_loadu_si512(base + r * stride) : _mm512_setzero_si512();
    transpose16(out);
}

}  // namespace deepinfer::backend::cpu::avx512
