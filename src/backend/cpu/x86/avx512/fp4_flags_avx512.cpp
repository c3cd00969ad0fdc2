// The one part of an act_quant row's integer MXFP4 form (Fp4RowLayout, isa_ops.h) that the AMX MXFP4 kernels read:
// per block, whether its sums are exact (kFp4SumsExact). They take the products from the tile activations
// (fp4_tile_acts), and a block without the flag from the vdpbf16ps chain of the row's values (gemm_fp4_amx_sums.cpp,
// gemm_amx.cpp), so the planes, bases, units and top plane that prep_plane_row (fp4_row_avx2.cpp) also writes are
// left unread there. Why: in a 2048-token prefill on the Intel Xeon (two released-dims layers, perf) the whole form
// took 237-263 samples beside ~2000 in the MoE's GEMM kernels, this 73-77 (docs/PERFORMANCE.md, "Forty-first
// session").
//
// The flag is prep_plane_row's, bit for bit: a block's e4m3 codes are v_k * 2^(e0 - 10) with integers
// v_k = M_k * 2^(E_k - e0) (M = 8 + m, E = e for normal codes, M = m, E = 1 for subnormal ones; e0 the smallest E
// among the nonzero codes), and the sums are exact when no code is NaN and sum |v_k| <= kFp4MaxChainSum.
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {

void prep_fp4_flags(const uint8_t* codes, int64_t k, uint8_t* out) {
    const int64_t kb_count = k / 32;
    uint8_t* exact = out + fp4_row_layout(kb_count).exact;
    const __m512i low7 = _mm512_set1_epi32(0x7f), seven = _mm512_set1_epi32(7), eight = _mm512_set1_epi32(8);
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i no_exponent = _mm512_set1_epi32(64);  // above every e4m3 exponent: the minimum of zero codes
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        __m512i mant[2], expo[2], lowest = no_exponent;
        __mmask16 nan = 0;
        for (int h = 0; h < 2; ++h) {  // columns 16 h .. 16 h + 15
            const __m512i code =
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 32 * kb + 16 * h)));
            const __m512i mag = _mm512_and_si512(code, low7);
            nan |= _mm512_cmpeq_epi32_mask(mag, low7);
            const __m512i e = _mm512_srli_epi32(mag, 3), m = _mm512_and_si512(mag, seven);
            mant[h] = _mm512_mask_or_epi32(m, _mm512_test_epi32_mask(e, e), m, eight);
            expo[h] = _mm512_max_epu32(e, one);
            lowest = _mm512_mask_min_epu32(lowest, _mm512_test_epi32_mask(mant[h], mant[h]), lowest, expo[h]);
        }
        // an all-zero block keeps 64: every shift below wraps, which vpsllvd turns into 0 (as the zero codes do)
        const __m512i e0 = _mm512_set1_epi32(static_cast<int>(_mm512_reduce_min_epu32(lowest)));
        const __m512i v0 = _mm512_sllv_epi32(mant[0], _mm512_sub_epi32(expo[0], e0));
        const __m512i v1 = _mm512_sllv_epi32(mant[1], _mm512_sub_epi32(expo[1], e0));
        const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(v0, v1));  // |v| <= 15 * 2^14: no overflow
        exact[kb] = nan == 0 && sum <= kFp4MaxChainSum ? kFp4SumsExact : 0;
    }
}

}  // namespace deepinfer::backend::cpu::avx512
