// `deepinfer version`: build and CPU information.
#include <fmt/format.h>

#include "backend/kernels.h"
#include "core/cpu_features.h"
#include "tools/commands.h"

namespace deepinfer::cli {

Command make_version_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto* sub = app.add_subcommand("version", "Print the version, the CPU features and the kernel set in use");
        sub->callback([exit_code] {
            const auto& f = cpu_features();
            fmt::print("deepinfer 0.1.0\nisa: {} (best: {})\navx2 {} fma {} avx512f {} avx512bw {} avx512vl {} "
                       "avx512_bf16 {} avx512_vnni {} avx_vnni {} amx_bf16 {}\n",
                       kernel_set_name(active_isa()), isa_name(best_isa()), f.avx2, f.fma, f.avx512f, f.avx512bw,
                       f.avx512vl, f.avx512_bf16, f.avx512_vnni, f.avx_vnni, f.amx_bf16);
            // (docs/numerics.md: where the check fails, MXFP4 of 5+ rows sums per block, to the same bits)
            if (active_isa() == Isa::kAvx512 && amx_enabled())
                fmt::print("amx mxfp4 (5+ rows): {}\n",
                           backend::cpu::avx512_fp4_sums_on_tiles()
                               ? "sums over all of k (the tile unit rounds once per tdpbf16ps)"
                               : "sums per block (the tile unit's rounding check failed)");
            *exit_code = 0;
        });
    }};
}

}  // namespace deepinfer::cli
