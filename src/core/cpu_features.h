// x86 ISA detection by cpuid/xgetbv, and the kernel set chosen from it (or forced by DEEPINFER_ISA).
#pragma once

#include <string_view>

namespace deepinfer {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
    bool avx512_bf16 = false, avx512_vnni = false, avx_vnni = false;
    bool avx512_vbmi = false;  // vpermi2b: the AVX-512 fp8 decode (backend/cpu/x86/avx512)
};

const CpuFeatures& cpu_features();
// Best ISA this machine supports: avx512 needs f/bw/vl/dq (bf16 and vnni are used when present).
Isa best_isa();
// The ISA kernels use: DEEPINFER_ISA if set (capped at best_isa()), else best_isa().
Isa active_isa();
std::string_view isa_name(Isa isa);
bool parse_isa(std::string_view name, Isa* out);

}  // namespace deepinfer
