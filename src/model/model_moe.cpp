// MoE (spec §5.4): sqrt(softplus) router with a selection-only bias, renormalised weights (+1e-20) times
// route_scale, routed MXFP4 experts with the routing weight applied before w2, and the fp8 shared
// expert; contributions summed in fp32 in ascending expert id, shared last, one rounding to bf16.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/model.h"
#include "ops/elementwise.h"
#include "ops/linear.h"

namespace deepinfer::model {
namespace {

// Indices of the k largest values (ties: lower index first).
void top_k(const float* v, int n, int k, int* out) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        return v[a] > v[b] || (v[a] == v[b] && a < b);
    });
    std::copy(order.begin(), order.begin() + k, out);
}

}  // namespace

void Model::moe(int block_index, const bf16* x, int64_t n, bf16* out) {
    const ModelConfig& c = config_;
    const BlockWeights& w = weights_->blocks[block_index];
    const LayerRole& role = c.roles[block_index];
    const int D = c.hidden_size, I = c.moe_intermediate_size, E = role.n_routed_experts, K = role.n_activated_experts;
    const float limit = static_cast<float>(c.swiglu_limit);

    // Router, all fp32.
    std::vector<float> xf(n * D), scores(n * E);
    ops::bf16_to_f32(x, n * D, xf.data());
    ops::linear_f32(xf.data(), n, w.gate, scores.data());
    std::vector<int> selected(n * K);
    std::vector<float> weights(n * K);
    std::vector<float> biased(E);
    for (int64_t i = 0; i < n; ++i) {
        float* s = scores.data() + i * E;
        for (int e = 0; e < E; ++e) s[e] = s[e] / static_cast<float>(c.gate_temp);
        switch (c.scoring_func) {
            case ScoringFunc::kSqrtSoftplus:
                for (int e = 0; e < E; ++e) s[e] = std::sqrt(ops::softplus(s[e]));
                break;
            case ScoringFunc::kSigmoid:
                for (int e = 0; e < E; ++e) s[e] = ops::sigmoid(s[e]);
                break;
            case ScoringFunc::kSoftmax: {
                float mx = *std::max_element(s, s + E), sum = 0.0f;
                for (int e = 0; e < E; ++e) sum += (s[e] = std::exp(s[e] - mx));
                for (int e = 0; e < E; ++e) s[e] /= sum;
                break;
            }
        }
        for (int e = 0; e < E; ++e) biased[e] = s[e] + w.gate_bias[e];  // the bias only selects
        top_k(biased.data(), E, K, selected.data() + i * K);
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += (weights[i * K + k] = s[selected[i * K + k]]);
        for (int k = 0; k < K; ++k) {
            if (c.norm_topk_prob && K > 1) weights[i * K + k] /= (sum + 1e-20f);  // literal 1e-20, not norm_eps
            weights[i * K + k] *= static_cast<float>(c.routed_scaling_factor);
        }
    }

    // Routed experts in ascending id; y accumulates in fp32.
    std::vector<float> y(n * D, 0.0f);
    std::vector<int64_t> rows;
    std::vector<float> row_weight;
    std::vector<bf16> xin, gate, up, h, eo;
    for (int e = w.expert_begin; e < w.expert_end; ++e) {  // this rank's experts (all of them without EP)
        rows.clear();
        row_weight.clear();
        for (int64_t i = 0; i < n; ++i)
            for (int k = 0; k < K; ++k)
                if (selected[i * K + k] == e) {
                    rows.push_back(i);
                    row_weight.push_back(weights[i * K + k]);
                }
        if (rows.empty()) continue;
        const int64_t m = static_cast<int64_t>(rows.size());
        xin.resize(m * D);
        for (int64_t r = 0; r < m; ++r) std::copy(x + rows[r] * D, x + rows[r] * D + D, xin.begin() + r * D);
        gate.resize(m * I);
        up.resize(m * I);
        h.resize(m * I);
        eo.resize(m * D);
        ops::linear_fp4(xin.data(), m, w.experts[e].w1, gate.data());
        ops::linear_fp4(xin.data(), m, w.experts[e].w3, up.data());
        ops::swiglu(gate.data(), up.data(), m, I, limit, row_weight.data(), h.data());
        ops::linear_fp4(h.data(), m, w.experts[e].w2, eo.data());
        for (int64_t r = 0; r < m; ++r)
            for (int k = 0; k < D; ++k) y[rows[r] * D + k] += bf16_to_float(eo[r * D + k]);
    }

    // Expert parallelism: the partial sums of every rank's experts, added in fp32 (the reference's all_reduce).
    if (plan_.ep_size > 1) all_reduce(plan_.ep, y.data(), y.size());

    // Shared expert on every row, added last.
    gate.resize(n * I);
    up.resize(n * I);
    h.resize(n * I);
    eo.resize(n * D);
    ops::linear_fp8(x, n, w.shared_w1, gate.data());
    ops::linear_fp8(x, n, w.shared_w3, up.data());
    ops::swiglu(gate.data(), up.data(), n, I, limit, nullptr, h.data());
    ops::linear_fp8(h.data(), n, w.shared_w2, eo.data());
    for (int64_t i = 0; i < n * D; ++i) out[i] = float_to_bf16(y[i] + bf16_to_float(eo[i]));
}

}  // namespace deepinfer::model
