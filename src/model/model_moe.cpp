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
#include "ops/topk.h"

namespace deepinfer::model {
namespace {

// Indices of the k largest values, chosen and ordered as the reference's (scores + bias).topk(k) does.
void top_k(const float* v, int n, int k, int* out) {
    std::vector<int64_t> order(k);
    std::vector<std::pair<float, int64_t>> queue;
    ops::torch_topk(v, n, k, true, queue, order.data());
    for (int i = 0; i < k; ++i) out[i] = static_cast<int>(order[i]);
}

}  // namespace

void Model::moe(int block_index, const bf16* x_mine, int64_t n_mine, bf16* out) {
    const ModelConfig& c = config_;
    // DP attention: route and run this rank's experts over the rows of every DP rank.
    const bf16* x = x_mine;
    int64_t n = n_mine;
    std::vector<bf16> gathered;
    std::vector<size_t> row_counts;
    if (plan_.dp_size > 1 && comm_status_.is_ok()) {
        uint64_t mine = static_cast<uint64_t>(n_mine);
        std::vector<uint64_t> all(plan_.dp_size);
        Status s = plan_.dp->all_gather(&mine, sizeof(mine), all.data());
        std::vector<size_t> bytes(plan_.dp_size);
        n = 0;
        for (int r = 0; r < plan_.dp_size; ++r) {
            row_counts.push_back(static_cast<size_t>(all[r]) * c.hidden_size);
            bytes[r] = static_cast<size_t>(all[r]) * c.hidden_size * sizeof(bf16);
            n += static_cast<int64_t>(all[r]);
        }
        gathered.resize(static_cast<size_t>(n) * c.hidden_size);
        if (s.is_ok()) s = plan_.dp->all_gather_v(x_mine, bytes, gathered.data());
        if (!s.is_ok()) {
            comm_status_ = s.with_context("MoE row gather");
            n = n_mine;
        } else {
            x = gathered.data();
        }
    }
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

    // Expert parallelism: the partial sums of every rank's experts, added in fp32 (the reference's all_reduce);
    // under DP attention each rank gets back the sums of its own rows.
    if (plan_.dp_size > 1 && x != x_mine) {
        std::vector<float> mine(static_cast<size_t>(n_mine) * D);
        if (comm_status_.is_ok()) {
            Status s = plan_.dp->reduce_scatter_sum_v(y.data(), row_counts, mine.data());
            if (!s.is_ok()) comm_status_ = s.with_context("MoE reduce-scatter");
        }
        y.swap(mine);
    } else if (plan_.ep_size > 1) {
        all_reduce(plan_.ep, y.data(), y.size());
    }

    // Shared expert on this rank's rows, added last. Split over TP (parallel.h): this rank's slice of the
    // intermediate dimension, w2 partial sums in fp32, summed over the group and rounded to bf16 once.
    n = n_mine;
    const int64_t Is = w.shared_w1.rows;  // I, or I / tp under the split
    gate.resize(n * Is);
    up.resize(n * Is);
    h.resize(n * Is);
    ops::linear_fp8(x_mine, n, w.shared_w1, gate.data());
    ops::linear_fp8(x_mine, n, w.shared_w3, up.data());
    ops::swiglu(gate.data(), up.data(), n, Is, limit, nullptr, h.data());
    if (w.shared_split) {
        std::vector<float> partial(n * D);
        ops::linear_fp8_f32(h.data(), n, w.shared_w2, partial.data());
        all_reduce(plan_.tp, partial.data(), partial.size());
        for (int64_t i = 0; i < n * D; ++i) out[i] = float_to_bf16(y[i] + bf16_to_float(float_to_bf16(partial[i])));
        return;
    }
    eo.resize(n * D);
    ops::linear_fp8(h.data(), n, w.shared_w2, eo.data());
    for (int64_t i = 0; i < n * D; ++i) out[i] = float_to_bf16(y[i] + bf16_to_float(eo[i]));
}

}  // namespace deepinfer::model
