// vpdpbusd on ymm registers in a form's encoding (fp4_chunk.h): the AVX-VNNI intrinsic (VEX) for AvxVnni, inline
// assembly with the {evex} prefix for EvexVnni -- the files that include this are built with -mavxvnni, not for
// AVX-512, so the compiler has no EVEX intrinsic here and allocates ymm0-15 only, which both encodings reach.
// acc + the sums of 4 products of u8's unsigned bytes with s8's signed bytes, per int32 lane. (The emulated test build,
// DEEPINFER_EMULATE_AVX_VNNI, takes AvxVnni's from emulated_vnni.h and builds these files without -mavxvnni.)
#pragma once

#include <immintrin.h>

#ifdef DEEPINFER_EMULATE_AVX_VNNI
#include "backend/cpu/x86/avx2/emulated_vnni.h"
#endif

namespace deepinfer::backend::cpu::avx2 {

template <class Form>
__attribute__((always_inline)) inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    static_assert(Form::kVnni, "the plain form has no dot-product instruction");
    if constexpr (Form::kEvex) {
        __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "xm"(s8));
        return acc;
    } else {
#ifdef DEEPINFER_EMULATE_AVX_VNNI
        return emulated_vnni::dpbusd(acc, u8, s8);  // (the emulated build: AVX2 code, the same sums)
#else
        return _mm256_dpbusd_avx_epi32(acc, u8, s8);
#endif
    }
}

}  // namespace deepinfer::backend::cpu::avx2
