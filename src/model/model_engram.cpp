// Engram (spec §5.5.2): gather and dequantize the hashed table rows, project to one key per hc copy and a
// shared value, gate each copy by its normalised dot product with the stream, add the gated value.
#include <cmath>
#include <vector>

#include "backend/kernels.h"
#include "core/scratch_pool.h"
#include "core/thread_pool.h"
#include "model/forward_state.h"
#include "ops/elementwise.h"
#include "ops/linear.h"

namespace deepinfer::model {

void Model::engram(Forward& f, int L, bf16* stream) {
    const ModelConfig& c = config_;
    const BlockWeights& w = weights_->blocks[L];
    const int hc = c.hc_mult, D = c.hidden_size, ehd = c.engram_head_dim, cols = engram_layout_.n_cols;
    const int64_t n = f.n;
    const std::vector<int64_t>& ids = f.engram_row_ids[c.roles[L].engram_index];

    // Rows dequantized to bf16 (fp32 product of e4m3 and the per-32 e8m0 scale), in column order.
    ScratchVector<bf16> gathered(n * cols * ehd);
    backend::active_kernels().gather_fp8_rows(w.engram_table, w.engram_scale, ehd, ids.data(), n * cols,
                                              gathered.data(), ThreadPool::global());
    ScratchVector<bf16> kv(n * D * (hc + 1));
    engram_projection(w, gathered.data(), n, kv.data());

    std::vector<float> weight(hc * D);  // q_weight * k_weight: only the product is used
    for (int i = 0; i < hc * D; ++i) weight[i] = bf16_to_float(w.engram_q_weight[i]) * bf16_to_float(w.engram_k_weight[i]);
    const float eps = static_cast<float>(c.rms_norm_eps);
    const float inv_sqrt_dim = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
    // One row's gates and update; rows over the pool (serial, they kept the other threads waiting).
    auto gate_row = [&](int64_t i) {
        const bf16* row_kv = kv.data() + i * D * (hc + 1);
        const bf16* value = row_kv + hc * D;
        for (int cpy = 0; cpy < hc; ++cpy) {
            bf16* h = stream + (i * hc + cpy) * D;
            const bf16* key = row_kv + cpy * D;
            float hh = 0.0f, kk = 0.0f, dot = 0.0f;
            for (int k = 0; k < D; ++k) {
                float hv = bf16_to_float(h[k]), kv_k = bf16_to_float(key[k]);
                hh += hv * hv;
                kk += kv_k * kv_k;
                dot += (hv * weight[cpy * D + k]) * kv_k;
            }
            // Norms per copy over D, not jointly over copies.
            float rstd = (1.0f / std::sqrt(hh / D + eps)) * (1.0f / std::sqrt(kk / D + eps));
            dot = dot * rstd * inv_sqrt_dim;
            float gate = ops::sigmoid(std::copysign(std::sqrt(std::fmax(std::fabs(dot), 1e-6f)), dot));
            for (int k = 0; k < D; ++k) h[k] = float_to_bf16(bf16_to_float(h[k]) + gate * bf16_to_float(value[k]));
        }
    };
    ThreadPool::global().parallel_for(static_cast<size_t>(n), [&](size_t i0, size_t i1, int) {
        for (size_t i = i0; i < i1; ++i) gate_row(static_cast<int64_t>(i));
    }, ops::kParallelRows);
}

}  // namespace deepinfer::model
