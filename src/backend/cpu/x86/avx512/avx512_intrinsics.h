// The intrinsics of the AVX-512 kernel TUs: <immintrin.h>, or SIMDe's portable ones in the emulated build
// (DEEPINFER_EMULATE_AVX512, emulated_avx512.h) where these TUs run on a CPU without AVX-512 for the tests.
#pragma once

#ifdef DEEPINFER_EMULATE_AVX512
#include "backend/cpu/x86/avx512/emulated_avx512.h"
// Inline-asm operand constraint for a zmm value: a register, or memory where the "zmm" is SIMDe's 64-byte struct.
#define DEEPINFER_ZMM "m"
#else
#include <immintrin.h>
#define DEEPINFER_ZMM "v"
#endif
// The tile intrinsics, emulated where AMX is (DEEPINFER_EMULATE_AMX: emulated_amx.h).
#ifdef DEEPINFER_EMULATE_AMX
#include "backend/cpu/x86/avx512/emulated_amx.h"
#endif
