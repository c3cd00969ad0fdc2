// x86 ISA detection by cpuid/xgetbv, and the kernel set chosen from it (or forced by DEEPINFER_ISA).
#pragma once

#include <string>
#include <string_view>

namespace deepinfer {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
    bool avx512_bf16 = false, avx512_vnni = false, avx_vnni = false;
    bool avx512_vbmi = false;  // vpermi2b: the AVX-512 fp8 decode (backend/cpu/x86/avx512)
    // AVX512-VNNI with VL and BW as the CPU itself has them, also in the emulated build (which sets the AVX-512 flags
    // above wherever AVX2 runs): the AVX2 table's EvexVnni form issues real EVEX instructions (avx2_vnni_encoding).
    bool evex_vnni_native = false;
    // 512-bit ops issued as two 256-bit halves (AMD family 19h, Zen 4): half the throughput of Zen 5 or Intel's
    // AVX-512 cores, so fewer independent dependency chains keep the units busy (the AVX-512 MXFP4 kernel). Among
    // the CPUs the AVX-512 kernel table takes (bf16 and vbmi) only Zen 4 has it, so it also selects the plans
    // measured there (the fp8 GEMV's software prefetch).
    bool zmm_half_rate = false;
    // 256-bit ops issued as two 128-bit halves (AMD family 17h models below 30h, Zen 1 and Zen+; Hygon's family 18h,
    // Dhyana, built on Zen 1): each ymm op takes two of the four vector pipes' slots, integer multiplies have one
    // pipe (shared with the FMAs) and shifts one, so the AVX2 table's decodes trade multiplies for shuffles there.
    bool ymm_half_rate = false;
    // AMX tiles with bf16 dot products (Intel from Sapphire Rapids on), with the OS saving tile state (XCR0).
    bool amx_bf16 = false;
};

const CpuFeatures& cpu_features();
// cpu_features().zmm_half_rate unless DEEPINFER_ZMM_RATE (half|full) says otherwise.
bool zmm_half_rate();
// cpu_features().ymm_half_rate unless DEEPINFER_YMM_RATE (half|full) says otherwise.
bool ymm_half_rate();
// Whether the AVX-512 table's fp8 GEMM runs on AMX tiles: cpu_features().amx_bf16, the kernel's permission to
// use tile data granted (arch_prctl, asked once here), and DEEPINFER_AMX not off. One answer for the whole process,
// as the kernel must serve every row count (row invariance, docs/numerics.md).
bool amx_enabled();
// How the AVX2 table's integer MXFP4 kernels take the VNNI dot products vpdpbusd / vpdpwssd on ymm registers:
// VEX-encoded (AVX-VNNI: Alder Lake and later Intel cores, Sierra Forest, Zen 5), EVEX-encoded where the CPU has them
// only with AVX-512 (AVX512-VNNI and AVX512VL: Cascade Lake, Ice Lake, Tiger Lake, Rocket Lake -- Intel's AVX-512 CPUs
// without bf16, which run the AVX2 table), or not at all (AVX2-only CPUs, DEEPINFER_AVX_VNNI=off).
// DEEPINFER_AVX_VNNI=evex takes the EVEX form where the CPU has both (tests). The sums are the same integers in every
// form: the same bits.
enum class VnniEncoding { kNone, kVex, kEvex };
VnniEncoding avx2_vnni_encoding();
bool avx_vnni_enabled();  // avx2_vnni_encoding() != kNone
// Best ISA this machine supports: avx512 needs f/bw/vl/dq (bf16 and vnni are used when present).
Isa best_isa();
// The ISA kernels use: DEEPINFER_ISA if set (capped at best_isa()), else best_isa().
Isa active_isa();
std::string_view isa_name(Isa isa);
// The kernel set as reports name it: isa_name, plus "+amx" for the AVX-512 table where amx_enabled(), "+vnni" or
// "+vnni(evex)" for the AVX2 table by avx2_vnni_encoding().
std::string kernel_set_name(Isa isa);
bool parse_isa(std::string_view name, Isa* out);

}  // namespace deepinfer
