// The scalar reference kernel table.
#include "backend/ref/ref_kernels.h"

namespace deepinfer::backend::ref {

const Kernels& kernels() {
    static const Kernels table = {Isa::kScalar, act_quant, gemm_fp8, gemm_fp8_f32, gemm_fp4, gemm_bf16, gemm_f32_bf16w, gemm_f32,
                                  sparse_attn, index_scores};
    return table;
}

}  // namespace deepinfer::backend::ref
