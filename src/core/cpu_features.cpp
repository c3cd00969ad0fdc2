// cpuid-based feature detection.
#include "core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "core/env.h"
#include "core/log.h"

namespace deepinfer {
namespace {

uint64_t xgetbv0() {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
    CpuFeatures f;
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
    // family = base family + extended family when the base is 0xf (AMD's 17h Zen 1-2, 19h Zen 3-4, 1Ah Zen 5)
    const unsigned base_family = (eax >> 8) & 0xf;
    const unsigned family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
    // model = base model + extended model << 4 where the base family is 6 or 0xf (Zen 1 / Zen+: 17h models < 30h)
    const unsigned model = ((eax >> 4) & 0xf) | ((base_family == 0xf || base_family == 6) ? ((eax >> 12) & 0xf0) : 0);
    bool osxsave = ecx & (1u << 27);
    f.fma = ecx & (1u << 12);
    f.f16c = ecx & (1u << 29);
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm_ok = (xcr0 & 0x6) == 0x6;
    bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
    f.avx2 = ymm_ok && (ebx & (1u << 5));
    f.avx512f = zmm_ok && (ebx & (1u << 16));
    f.avx512dq = zmm_ok && (ebx & (1u << 17));
    f.avx512bw = zmm_ok && (ebx & (1u << 30));
    f.avx512vl = zmm_ok && (ebx & (1u << 31));
    f.avx512_vnni = zmm_ok && (ecx & (1u << 11));
    f.avx512_vbmi = zmm_ok && (ecx & (1u << 1));
    unsigned eax1, ebx1, ecx1, edx1;
    if (__get_cpuid_count(7, 1, &eax1, &ebx1, &ecx1, &edx1)) {
        f.avx512_bf16 = zmm_ok && (eax1 & (1u << 5));
        f.avx_vnni = ymm_ok && (eax1 & (1u << 4));
    }
    // AMX-TILE (edx bit 24) and AMX-BF16 (bit 22), the tile configuration and data state enabled (XCR0 17, 18)
    f.amx_bf16 = (xcr0 & 0x60000) == 0x60000 && (edx & (1u << 24)) && (edx & (1u << 22));
    if (!f.fma) f.avx2 = false;
    f.evex_vnni_native = f.avx512_vnni && f.avx512vl && f.avx512bw;
#ifdef DEEPINFER_EMULATE_AVX512
    // the emulated build (backend/cpu/x86/avx512/emulated_avx512.h): the AVX-512 table runs on SIMDe wherever
    // AVX2 does
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_bf16 = f.avx512_vnni = f.avx512_vbmi = f.avx2;
#endif
#ifdef DEEPINFER_EMULATE_AVX_VNNI
    // the AVX2 table's AvxVnni form with its dot products emulated (backend/cpu/x86/avx2/emulated_vnni.h); the
    // EvexVnni form stays where the CPU has it (evex_vnni_native)
    f.avx_vnni = f.avx2;
#endif
#ifdef DEEPINFER_EMULATE_AMX
    // emulated tiles (backend/cpu/x86/avx512/emulated_amx.h) wherever the AVX-512 table runs
    f.amx_bf16 = f.avx512_bf16 && f.avx512_vbmi;
#endif
    unsigned vendor[3];
    if (__get_cpuid(0, &eax, &vendor[0], &vendor[2], &vendor[1])) {
        const bool amd = vendor[0] == 0x68747541u && vendor[1] == 0x69746e65u && vendor[2] == 0x444d4163u;  // AuthenticAMD
        f.zmm_half_rate = amd && family == 0x19 && f.avx512f;
        // HygonGenuine: "Hygo" (ebx), "nGen" (edx), "uine" (ecx)
        const bool hygon = vendor[0] == 0x6f677948u && vendor[1] == 0x6e65476eu && vendor[2] == 0x656e6975u;
        f.ymm_half_rate = (amd && family == 0x17 && model < 0x30) || (hygon && family == 0x18);
    }
    return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

namespace {

// A rate's switch `var` = half|full (value `forced`, empty when unset), else what the CPU has (`cpu_half`).
bool rate_switch(const char* var, const std::string& forced, bool cpu_half) {
    if (forced == "half") return true;
    if (forced == "full") return false;
    if (!forced.empty()) log::warn("{}={} is not one of half|full; ignored", var, forced);
    return cpu_half;
}

}  // namespace

bool zmm_half_rate() {
    static const bool half =
        rate_switch("DEEPINFER_ZMM_RATE", env::forced_zmm_rate(), cpu_features().zmm_half_rate);
    return half;
}

bool ymm_half_rate() {
    static const bool half =
        rate_switch("DEEPINFER_YMM_RATE", env::forced_ymm_rate(), cpu_features().ymm_half_rate);
    return half;
}

namespace {

// A feature's switch `var` = on|off (value `forced`, empty when unset): false when off or when the CPU lacks the
// feature (with a warning where on was asked for), else true; any other value is warned about and ignored.
bool feature_switch(const char* var, const std::string& forced, bool cpu_has, const char* feature) {
    if (forced == "off") return false;
    if (!forced.empty() && forced != "on") log::warn("{}={} is not one of on|off; ignored", var, forced);
    if (!cpu_has && forced == "on") log::warn("{}=on: this CPU has no {}; not used", var, feature);
    return cpu_has;
}

}  // namespace

bool amx_enabled() {
    static const bool enabled = [] {
        if (!feature_switch("DEEPINFER_AMX", env::forced_amx(),
                            cpu_features().amx_bf16 && cpu_features().avx512_bf16, "AMX-BF16"))
            return false;
#ifndef DEEPINFER_EMULATE_AMX  // (emulated tiles: no tile state to ask the kernel for)
        // Linux hands out the tile data state only on request (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA),
        // once per process; a thread using tiles without it is killed.
        constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
        if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
            log::warn("AMX: the kernel refused the tile data permission; the fp8 GEMM runs without AMX");
            return false;
        }
#endif
        return true;
    }();
    return enabled;
}

VnniEncoding avx2_vnni_encoding() {
    static const VnniEncoding encoding = [] {
        const CpuFeatures& f = cpu_features();
        // (the EVEX form's panel tile is on zmm: BW for its word shifts; each flag implies the OS saves the state)
        const bool evex = f.evex_vnni_native;
        const std::string forced = env::forced_avx_vnni();
        if (forced == "evex") {
            if (evex) return VnniEncoding::kEvex;
            log::warn("DEEPINFER_AVX_VNNI=evex: this CPU has no AVX512-VNNI with AVX512VL; not used");
        }
        const bool on = feature_switch("DEEPINFER_AVX_VNNI", forced == "evex" ? std::string() : forced,
                                       f.avx_vnni || evex, "AVX-VNNI or AVX512-VNNI");
        if (!on) return VnniEncoding::kNone;
        return f.avx_vnni ? VnniEncoding::kVex : VnniEncoding::kEvex;
    }();
    return encoding;
}

bool avx_vnni_enabled() { return avx2_vnni_encoding() != VnniEncoding::kNone; }

Isa best_isa() {
    const auto& f = cpu_features();
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx2) return Isa::kAvx512;
    if (f.avx2) return Isa::kAvx2;
    return Isa::kScalar;
}

Isa active_isa() {
    static const Isa isa = [] {
        Isa best = best_isa();
        std::string forced = env::forced_isa();
        if (forced.empty()) return best;
        Isa requested;
        if (!parse_isa(forced, &requested)) {
            log::warn("DEEPINFER_ISA={} is not one of scalar|avx2|avx512; using {}", forced, isa_name(best));
            return best;
        }
        if (static_cast<int>(requested) > static_cast<int>(best)) {
            log::warn("DEEPINFER_ISA={} is not supported by this CPU; using {}", forced, isa_name(best));
            return best;
        }
        return requested;
    }();
    return isa;
}

std::string_view isa_name(Isa isa) {
    switch (isa) {
        case Isa::kScalar: return "scalar";
        case Isa::kAvx2: return "avx2";
        case Isa::kAvx512: return "avx512";
    }
    return "?";
}

std::string kernel_set_name(Isa isa) {
    std::string name(isa_name(isa));
    if (isa == Isa::kAvx512 && amx_enabled()) name += "+amx";
    if (isa == Isa::kAvx2 && avx2_vnni_encoding() == VnniEncoding::kVex) name += "+vnni";
    if (isa == Isa::kAvx2 && avx2_vnni_encoding() == VnniEncoding::kEvex) name += "+vnni(evex)";
    return name;
}

bool parse_isa(std::string_view name, Isa* out) {
    if (name == "scalar") *out = Isa::kScalar;
    else if (name == "avx2") *out = Isa::kAvx2;
    else if (name == "avx512") *out = Isa::kAvx512;
    else return false;
    return true;
}

}  // namespace deepinfer
