// Helpers shared by the AVX2 kernel TUs (built with -mavx2 -mfma -mf16c). Everything lives in namespace
// avx2 so no symbol is shared with code built for another ISA.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/x86_tables.h"

namespace deepinfer::backend::cpu::avx2 {

// Activation rows up to which the quantized GEMMs decode each chunk of codes for every row at once (more rows
// get the row group decoded into a panel first; gemm_quant_avx2.cpp, gemm_fp4_int_avx2.cpp).
constexpr int64_t kStreamRows = 4;

// The codes of the row group after the one a panel kernel computes (gemm_quant_avx2.cpp, gemm_fp4_int_avx2.cpp),
// requested into L2 block by block during the group's first tile, so that decoding that group into the panel finds
// them there instead of stalling on memory with no arithmetic to overlap.
struct NextGroup {
    const uint8_t* codes = nullptr;  // null: none (the task's last group, or a later tile)
    int64_t block_stride = 0, piece_stride = 0;
    template <int kPieces>
    inline void prefetch_block(int64_t kb) const {
        if (!codes) return;
#pragma GCC unroll 8
        for (int c = 0; c < kPieces; ++c)
            _mm_prefetch(reinterpret_cast<const char*>(codes + kb * block_stride + c * piece_stride), _MM_HINT_T1);
    }
};

// A kernel scratch buffer's first 64-byte boundary (the drivers reserve 64 bytes of slack).
inline uint8_t* align64(void* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~static_cast<uintptr_t>(63));
}

// The least / greatest of 8 unsigned dwords.
inline uint32_t hmin_epu32(__m256i v) {
    v = _mm256_min_epu32(v, _mm256_permute2x128_si256(v, v, 1));
    v = _mm256_min_epu32(v, _mm256_shuffle_epi32(v, 0x4e));
    v = _mm256_min_epu32(v, _mm256_shuffle_epi32(v, 0xb1));
    return static_cast<uint32_t>(_mm256_cvtsi256_si32(v));
}
inline uint32_t hmax_epu32(__m256i v) {
    v = _mm256_max_epu32(v, _mm256_permute2x128_si256(v, v, 1));
    v = _mm256_max_epu32(v, _mm256_shuffle_epi32(v, 0x4e));
    v = _mm256_max_epu32(v, _mm256_shuffle_epi32(v, 0xb1));
    return static_cast<uint32_t>(_mm256_cvtsi256_si32(v));
}

inline __m256 from_bf16(__m128i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)); }
inline __m256 load_bf16(const uint16_t* p) { return from_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// fp32 -> bf16 bits (round-to-nearest-even, NaN kept quiet), as numeric.h float_to_bf16, in 32-bit lanes.
inline __m256i to_bf16_epi32(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, quiet, nan);
}
inline __m128i to_bf16(__m256 v) {
    const __m256i r = to_bf16_epi32(v);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}
// Round to the nearest bf16 value, kept as fp32 (numeric.h round_to_bf16).
inline __m256 round_bf16(__m256 v) { return _mm256_castsi256_ps(_mm256_slli_epi32(to_bf16_epi32(v), 16)); }

inline float e8m0_to_float(uint8_t b) { return tables::kE8M0.v[b]; }

// 8 e8m0 bytes -> fp32.
inline __m256 e8m0_to_ps(const uint8_t* p) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    __m256i bits = _mm256_slli_epi32(b, 23);
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(b, _mm256_setzero_si256()));
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(b, _mm256_set1_epi32(255)));
    return _mm256_castsi256_ps(bits);
}

inline void transpose8(__m256 (&r)[8]) {
    __m256 t[8], s[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 4) {
        s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    }
}

// One indexer head's term of the scores of 64 keys (dot: 64 fp32 dot products), added in head order (spec §5.3.5;
// attention_avx2.cpp and index_fp4_avx2.cpp): total += bf16(relu(bf16(dot)) * w).
inline void add_head_scores(__m256 (&total)[8], const float* dot, uint16_t w_bits) {
    const uint32_t bits = static_cast<uint32_t>(w_bits) << 16;
    float wf;
    __builtin_memcpy(&wf, &bits, 4);
    const __m256 wv = _mm256_set1_ps(wf);
#pragma GCC unroll 16
    for (int g = 0; g < 8; ++g) {
        const __m256 relu = _mm256_max_ps(_mm256_setzero_ps(), round_bf16(_mm256_load_ps(dot + 8 * g)));  // NaN passes
        total[g] = _mm256_add_ps(total[g], round_bf16(_mm256_mul_ps(relu, wv)));
    }
}

// The summed scores of 64 keys rounded to bf16 (kept as fp32), the first `valid` of them stored to out.
inline void store_head_scores(const __m256 (&total)[8], int valid, float* out) {
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
        alignas(32) float v[8];
        _mm256_store_ps(v, round_bf16(total[g]));
        for (int l = 0; l < 8 && 8 * g + l < valid; ++l) out[8 * g + l] = v[l];
    }
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// expf to about 1 ulp (Cephes polynomial); 2^n applied in two exact-then-rounding steps so results in the
// subnormal range round once, like libm. NaN stays NaN, -inf gives 0.
inline __m256 exp_ps(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));  // NaN passes
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
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
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

}  // namespace deepinfer::backend::cpu::avx2
