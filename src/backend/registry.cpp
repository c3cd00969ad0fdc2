// Kernel-table selection by ISA (cpuid, or DEEPINFER_ISA for tests and benchmarks).
#include "core/check.h"
#include "core/log.h"
#include "backend/kernels.h"

namespace deepinfer::backend {

const Kernels& kernels_for(Isa isa) {
    switch (isa) {
        case Isa::kAvx512:
            if (const Kernels* k = cpu::avx512_kernels()) return *k;
            [[fallthrough]];
        case Isa::kAvx2:
            if (const Kernels* k = cpu::avx2_kernels()) return *k;
            [[fallthrough]];
        case Isa::kScalar:
            return ref::kernels();
    }
    return ref::kernels();
}

const Kernels& active_kernels() {
    static const Kernels& table = [&]() -> const Kernels& {
        const Kernels& k = kernels_for(active_isa());
        log::debug("kernels: {}", isa_name(k.isa));
        return k;
    }();
    return table;
}

}  // namespace deepinfer::backend
