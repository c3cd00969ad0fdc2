// The scalar reference kernel table.
#include "backend/ref/ref_kernels.h"

namespace deepinfer::backend::ref {
namespace {

// The reference reads the checkpoint layout only.
void prepare_fp8(const Fp8Matrix& w, PackedWeight* out, ThreadPool&) {
    out->layout = PackedLayout::kNone;
    out->rows = w.rows;
    out->cols = w.cols;
    out->data = nullptr;
    out->size = 0;
}
void prepare_fp4(const Fp4Matrix& w, PackedWeight* out, ThreadPool&) {
    out->layout = PackedLayout::kNone;
    out->rows = w.rows;
    out->cols = w.cols;
    out->data = nullptr;
    out->size = 0;
}

// One after the other: the reference has no threading across GEMMs to gain.
void gemm_fp4_grouped(const Fp4Gemm* gemms, int64_t count, ThreadPool& pool) {
    for (int64_t i = 0; i < count; ++i) gemm_fp4(gemms[i].a, gemms[i].w, gemms[i].out, gemms[i].ldo, pool);
}

}  // namespace

const Kernels& kernels() {
    static const Kernels table = {.isa = Isa::kScalar,
                                  .prepare_fp8 = prepare_fp8,
                                  .prepare_fp4 = prepare_fp4,
                                  .act_quant = act_quant,
                                  .gemm_fp8 = gemm_fp8,
                                  .gemm_fp8_f32 = gemm_fp8_f32,
                                  .gemm_fp8_bf16x = gemm_fp8_bf16x,
                                  .gemm_fp8_bf16x_grouped = gemm_fp8_bf16x_grouped,
                                  .gemm_fp4 = gemm_fp4,
                                  .gemm_fp4_grouped = gemm_fp4_grouped,
                                  .gemm_bf16 = gemm_bf16,
                                  .gemm_f32_bf16w = gemm_f32_bf16w,
                                  .gemm_f32 = gemm_f32,
                                  .gemm_f32_squares = gemm_f32_squares,
                                  .sparse_attn = sparse_attn,
                                  .index_scores = index_scores,
                                  .index_scores_fp4 = index_scores_fp4,
                                  .rms_norm = rms_norm,
                                  .swiglu = swiglu,
                                  .rope = rope,
                                  .pair_pool = pair_pool,
                                  .hc_sinkhorn = hc_sinkhorn,
                                  .hc_collapse = hc_collapse,
                                  .hc_expand = hc_expand,
                                  .topk_entries = topk_entries,
                                  .gather_fp8_rows = gather_fp8_rows,
                                  .unpack_records = unpack_records};
    return table;
}

}  // namespace deepinfer::backend::ref
