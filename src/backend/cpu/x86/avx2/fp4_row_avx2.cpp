// The integer form of act_quant rows that the integer MXFP4 kernels read (Fp4RowLayout in isa_ops.h: two int8
// planes for AVX2's GEMV and AVX-512's GEMM, broadcast too for AVX2's GEMM of 2-4 rows and its plain form's GEMV
// (fp4_planes.h); Fp4PanelRow in fp4_chunk.h: int16 words for AVX2's panel GEMM).
// A block's e4m3 values are v_k * 2^(e - 10) with integers v_k, e the smallest exponent among its nonzero values
// (the argument for why the kernels' integer sums are the fp32 chain's: gemv_fp4_int_avx2.cpp).
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/avx2/fp4_planes.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

inline int hsum_epi32(__m256i v) {
    v = _mm256_add_epi32(v, _mm256_permute2x128_si256(v, v, 1));
    v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0x4e));
    v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0xb1));
    return _mm256_cvtsi256_si32(v);
}

// The low bytes of 8 dwords, in order.
inline int64_t low_bytes(__m256i v) {
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i b =
        _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, pick), _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    return _mm256_extract_epi64(b, 0);
}

// 8 int32 (each fitting int16) -> 8 int16 at p.
inline void store_words(uint8_t* p, __m256i v) {
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(v, v), 0x08);
    _mm_store_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(w));
}

inline __m256i with_sign(__m256i magnitude, __m256i negative) {
    return _mm256_sub_epi32(_mm256_xor_si256(magnitude, negative), negative);
}

// Bits 0, 2, 4, 6 of b or'ed with bits 1, 3, 5, 7, packed into 4 bits: columns to pairs of columns.
inline uint32_t pairs_of(uint32_t b) {
    b = (b | b >> 1) & 0x55u;
    return (b & 1u) | (b >> 1 & 2u) | (b >> 2 & 4u) | (b >> 3 & 8u);
}

// The largest sum of |words| of a panel row's block: the panel GEMM's weights are 256 * 2 w (the int8 in the high
// byte of an int16), and every partial sum of its int32 products must stay below 2^31.
constexpr uint32_t kMaxPanelWordSum = ((uint32_t{1} << 31) - 1) / (256 * 12);

// One row in the planes form (Fp4RowLayout) or, with kPanel, the panel GEMM's (Fp4PanelRow).
template <bool kPanel>
void prep_row(const uint8_t* codes, int64_t k, uint8_t* out) {
    const int64_t kb_count = k / 32;
    const Fp4RowLayout layout = fp4_row_layout(kb_count);
    const Fp4PanelRow panel = fp4_panel_row(kb_count);
    auto* unit = reinterpret_cast<float*>(out + (kPanel ? panel.unit : layout.unit));
    // position p of a chunk's 8 columns <- column order[p]: the packed dwords' column order
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i seven = _mm256_set1_epi32(7), eight = _mm256_set1_epi32(8), one = _mm256_set1_epi32(1);
    const __m256i half = _mm256_set1_epi32(128), nan_code = _mm256_set1_epi32(0x7f), zero = _mm256_setzero_si256();
    constexpr int kNoExponent = 64;  // above every e4m3 exponent: the minimum of an all-zero block
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        __m256i mant[4], expo[4], negative[4], nan = zero;
        __m256i emin = _mm256_set1_epi32(kNoExponent);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m256i code =
                _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + 32 * kb + 8 * c)));
            const __m256i mag = _mm256_and_si256(code, _mm256_set1_epi32(0x7f));
            const __m256i e = _mm256_srli_epi32(mag, 3), m = _mm256_and_si256(mag, seven);
            nan = _mm256_or_si256(nan, _mm256_cmpeq_epi32(mag, nan_code));
            negative[c] = _mm256_cmpgt_epi32(code, _mm256_set1_epi32(0x7f));
            // e4m3 = M * 2^(E - 10): M = 8 + m and E = e for normal codes, M = m and E = 1 for subnormals
            mant[c] = _mm256_or_si256(m, _mm256_andnot_si256(_mm256_cmpeq_epi32(e, zero), eight));
            expo[c] = _mm256_max_epu32(e, one);
            emin = _mm256_min_epu32(emin, _mm256_blendv_epi8(_mm256_set1_epi32(kNoExponent), expo[c],
                                                             _mm256_cmpgt_epi32(mant[c], zero)));
        }
        // an all-zero block keeps kNoExponent: its integer sum is 0, whatever (finite) unit it gets
        const int e0 = static_cast<int>(hmin_epu32(emin));
        unit[kb] = std::bit_cast<float>(static_cast<uint32_t>(e0 - 11 + 25 + 127) << 23);
        // |v| = M * 2^(E - e0); a zero code's shift may wrap, which vpsllvd turns into 0 as well
        __m256i magnitude[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c)
            magnitude[c] = _mm256_sllv_epi32(mant[c], _mm256_sub_epi32(expo[c], _mm256_set1_epi32(e0)));
        if constexpr (!kPanel) {
            __m256i sum = zero, magnitudes = zero, bad = nan;
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m256i v = _mm256_permutevar8x32_epi32(with_sign(magnitude[c], negative[c]), order);
                sum = _mm256_add_epi32(sum, v);
                magnitudes = _mm256_add_epi32(magnitudes, magnitude[c]);  // |v| <= 15 * 2^14: no overflow
                // v = 256 * hi + lo with lo the low byte as int8; two planes hold v when hi is an int8 too, and
                // hi = 256 * top + (its low byte) otherwise (|v| <= 15 * 2^14: |top| <= 4)
                const __m256i hi = _mm256_srai_epi32(_mm256_add_epi32(v, half), 8);
                const __m256i top = _mm256_srai_epi32(_mm256_add_epi32(hi, half), 8);
                bad = _mm256_or_si256(bad, top);
                const int64_t lo_bytes = low_bytes(v), hi_bytes = low_bytes(hi), top_bytes = low_bytes(top);
                std::memcpy(out + 64 * kb + 8 * c, &lo_bytes, 8);
                std::memcpy(out + 64 * kb + 32 + 8 * c, &hi_bytes, 8);
                std::memcpy(out + layout.top + 32 * kb + 8 * c, &top_bytes, 8);
            }
            reinterpret_cast<int32_t*>(out + layout.base)[kb] = -tables::kE2M1Bias * hsum_epi32(sum);
            const bool no_nan = _mm256_testz_si256(nan, nan);
            out[layout.exact + kb] = static_cast<uint8_t>(
                (_mm256_testz_si256(bad, bad) ? kFp4PlanesExact : 0) |
                (no_nan && hsum_epi32(magnitudes) <= kFp4MaxChainSum ? kFp4SumsExact : 0));
        } else {
            // |v| <= 15 * 2^14 and sum |v| <= 32 * 15 * 2^14: no int32 overflows
            __m256i vmax = zero, vsum = zero;
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                vmax = _mm256_max_epu32(vmax, magnitude[c]);
                vsum = _mm256_add_epi32(vsum, magnitude[c]);
            }
            const uint32_t largest = hmax_epu32(vmax), total = static_cast<uint32_t>(hsum_epi32(vsum));
            int shift = 0;  // (the sum of floor(|v| / 2^shift) is at most total >> shift)
            while ((largest >> shift) > 32767u || (total >> shift) > kMaxPanelWordSum) ++shift;
            const bool chain = !_mm256_testz_si256(nan, nan) || total > kFp4MaxChainSum;
            out[panel.shift + kb] = chain ? kChainBlock : static_cast<uint8_t>(shift);
            const __m128i count = _mm_cvtsi32_si128(shift);
            uint32_t lo_pairs = 0;
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m256i kept = _mm256_srl_epi32(magnitude[c], count);
                const __m256i dropped = _mm256_sub_epi32(magnitude[c], _mm256_sll_epi32(kept, count));
                store_words(out + panel.words + 64 * kb + 16 * c, with_sign(kept, negative[c]));
                store_words(out + panel.lows + 64 * kb + 16 * c, with_sign(dropped, negative[c]));
                const auto nonzero = static_cast<uint32_t>(
                    ~_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(dropped, zero))) & 0xff);
                lo_pairs |= pairs_of(nonzero) << (4 * c);
            }
            const auto pairs = static_cast<uint16_t>(lo_pairs);
            std::memcpy(out + panel.lo_pairs + 2 * kb, &pairs, 2);
        }
    }
}

// Each plane dword of a row 8 times (fp4_planes.h: the rows of a GEMM of two activation rows), after its planes.
void broadcast_planes(int64_t kb_count, uint8_t* out) {
    auto* dst = reinterpret_cast<__m256i*>(out + fp4_broadcast_offset(kb_count));
    for (int64_t kb = 0; kb < kb_count; ++kb)
        broadcast_block_planes(reinterpret_cast<const int32_t*>(out + 64 * kb), dst + 16 * kb);
}

}  // namespace

// What the AVX2 MXFP4 GEMM of n rows reads (gemm_quant_avx2.cpp gemm_fp4): the panel GEMM's words where it runs
// (fp4_panel_rows: 5+ rows, 3+ in the EvexVnni form); else the planes and their broadcast dwords for 1-2 rows
// (gemv_fp4_int_avx2.cpp, gemm_fp4_few_rows_avx2.cpp; 3-4 too with AVX-VNNI, whose GEMV broadcasts in registers and
// takes the planes alone), for 3-4 without it nothing (the fp32 kernel; where ymm ops issue as two halves the panel's
// words, fp4_panel_rows).
int64_t fp4_row_bytes(int64_t k, int64_t n) {
    if (fp4_panel_rows(n)) return fp4_panel_row(k / 32).bytes;
    if (n == 1 && avx_vnni_enabled()) return fp4_row_layout(k / 32).bytes;
    return n <= 2 || avx_vnni_enabled() ? fp4_rows_bytes(k / 32) : 0;
}
void prep_fp4_row(const uint8_t* codes, int64_t k, int64_t n, uint8_t* out) {
    if (fp4_panel_rows(n)) return prep_row<true>(codes, k, out);
    prep_row<false>(codes, k, out);
    if (n >= 2 || !avx_vnni_enabled()) broadcast_planes(k / 32, out);
}
int64_t plane_row_bytes(int64_t k, int64_t) { return fp4_row_layout(k / 32).bytes; }
void prep_plane_row(const uint8_t* codes, int64_t k, int64_t, uint8_t* out) { prep_row<false>(codes, k, out); }

}  // namespace deepinfer::backend::cpu::avx2
