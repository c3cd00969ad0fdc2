// The emulated build's AVX-VNNI (DEEPINFER_EMULATE_AVX_VNNI, defined with DEEPINFER_EMULATE_AVX512; preset
// avx512emu): the AVX2 table's AvxVnni form (fp4_chunk.h) takes its ymm dot products from here, as AVX2 code, so that
// the form's loops run -- and the op tests check them against the scalar reference -- on CPUs without AVX-VNNI (Zen 1
// to Zen 4, Intel before Alder Lake). Test-only: never the product build, whose AvxVnni form issues the instructions.
// The same integers as the instructions: each product and pair sum below fits int32, and the sums wrap as theirs do.
// tests/ops/emulated_vnni_test.cpp pins dpbusd against its definition in every build.
#pragma once

#include <immintrin.h>

namespace deepinfer::backend::cpu::avx2::emulated_vnni {

// vpdpbusd (no saturation): acc + per int32 lane the 4 products of u8's unsigned bytes with s8's signed bytes. The
// even and the odd bytes widened to words, one vpmaddwd each: a pair sum is at most 2 * 255 * 128 in magnitude.
inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    const __m256i low_bytes = _mm256_set1_epi16(0x00ff);
    const __m256i u_even = _mm256_and_si256(u8, low_bytes), u_odd = _mm256_srli_epi16(u8, 8);
    const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s8, 8), 8), s_odd = _mm256_srai_epi16(s8, 8);
    const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd));
    return _mm256_add_epi32(acc, sums);
}

}  // namespace deepinfer::backend::cpu::avx2::emulated_vnni

// vpdpwssd for inline assembly with no register to spare (the panel GEMM's sums loops, gemm_fp4_int_avx2.cpp, hold up
// to 12 sums and every other register): s += the pair sums of w with x, a register holding the dword broadcast from
// src, by a vpmaddwd into x itself and a vpaddd; then x is broadcast from src again. AT&T order, as the loops spell
// it. vpmaddwd's one wrapping case (all four words -32768: 2^31) wraps in vpdpwssd's sum the same way.
#define DEEPINFER_EMULATED_VPDPWSSD(src, x, w, s) \
    "vpmaddwd " w ", " x ", " x "\n\tvpaddd " x ", " s ", " s "\n\tvpbroadcastd " src ", " x "\n\t"
