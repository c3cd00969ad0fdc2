// SIMD kernel tables. Until the AVX2 / AVX-512 kernels land, no SIMD table is compiled in and the
// registry falls back to the scalar reference.
#include "backend/kernels.h"

namespace deepinfer::backend::cpu {

const Kernels* avx2_kernels() { return nullptr; }
const Kernels* avx512_kernels() { return nullptr; }

}  // namespace deepinfer::backend::cpu
