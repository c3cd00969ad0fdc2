// MoE (spec §5.4): sqrt(softplus) router with a selection-only bias, renormalised weights (+1e-20) times
// route_scale, routed MXFP4 experts with the routing weight applied before w2, and the fp8 shared
// expert; contributions summed in fp32 in ascending expert id, shared last, one rounding to bf16.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/scratch_pool.h"
#include "core/thread_pool.h"
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

    // Router, all fp32. The row loops here and the gathers and sums below run over the pool from
    // ops::kParallelRows rows (docs/PERFORMANCE.md, "Sixteenth session": with a prefill's other serial loops,
    // 2048-token TTFT 5.65-6.15 -> 5.19-5.35 s).
    ThreadPool& pool = ThreadPool::global();
    constexpr int64_t kRowGrain = ops::kParallelRows;
    ScratchVector<float> xf(n * D), scores(n * E);
    ops::bf16_rows_to_f32(x, n, D, xf.data());
    ops::linear_f32(xf.data(), n, w.gate, scores.data());
    std::vector<int> selected(n * K);
    std::vector<float> weights(n * K);
    // Row i's scores, its top K (the bias only selects) and their weights; biased: E floats of scratch.
    auto route = [&](int64_t i, float* biased) {
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
        for (int e = 0; e < E; ++e) biased[e] = s[e] + w.gate_bias[e];
        top_k(biased, E, K, selected.data() + i * K);
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += (weights[i * K + k] = s[selected[i * K + k]]);
        for (int k = 0; k < K; ++k) {
            if (c.norm_topk_prob && K > 1) weights[i * K + k] /= (sum + 1e-20f);  // literal 1e-20, not norm_eps
            weights[i * K + k] *= static_cast<float>(c.routed_scaling_factor);
        }
    };
    pool.parallel_for(static_cast<size_t>(n), [&](size_t i0, size_t i1, int) {
        std::vector<float> biased(E);
        for (auto i = static_cast<int64_t>(i0); i < static_cast<int64_t>(i1); ++i) route(i, biased.data());
    }, kRowGrain);

    // Routed experts in ascending id; y accumulates in fp32. Experts run in batches (all of a decode step's in
    // one): every w1 / w3 of a batch in one grouped kernel call, SwiGLU, then every w2 in a second one, so the
    // threads stream the experts back to back (ops::linear_fp4_grouped; same results as one call each).
    // A batch closes once it holds kBatchRows rows: prefill experts have rows enough to fill the threads
    // alone, and the batch's buffers stay small.
    constexpr int64_t kBatchRows = 64;
    ScratchVector<float> y(n * D, 0.0f);
    struct ExpertRows {
        int e;
        std::vector<int64_t> rows;
        std::vector<float> row_weight;
        ScratchVector<bf16> xin, gate, up, h, eo;
    };
    std::vector<ExpertRows> batch;
    int64_t batch_rows = 0;
    auto run_batch = [&] {
        std::vector<ops::Fp4Linear> gate_up, down;
        for (ExpertRows& r : batch) {
            const int64_t m = static_cast<int64_t>(r.rows.size());
            gate_up.push_back({r.xin.data(), m, &w.experts[r.e].w1, r.gate.data()});
            gate_up.push_back({r.xin.data(), m, &w.experts[r.e].w3, r.up.data()});
        }
        ops::linear_fp4_grouped(gate_up);
        for (ExpertRows& r : batch) {
            const int64_t m = static_cast<int64_t>(r.rows.size());
            ops::swiglu(r.gate.data(), r.up.data(), m, I, limit, r.row_weight.data(), r.h.data());
            down.push_back({r.h.data(), m, &w.experts[r.e].w2, r.eo.data()});
        }
        ops::linear_fp4_grouped(down);
        // y += each expert's rows, experts in order: split by columns, so each element's sum keeps that order
        pool.parallel_for(static_cast<size_t>(D), [&](size_t k0, size_t k1, int) {
            for (const ExpertRows& r : batch)
                for (size_t j = 0; j < r.rows.size(); ++j)
                    for (size_t k = k0; k < k1; ++k) y[r.rows[j] * D + k] += bf16_to_float(r.eo[j * D + k]);
        }, batch_rows >= kRowGrain ? 64 : D);
        batch.clear();
        batch_rows = 0;
    };
    // Each expert's rows in ascending order (one pass over the selections, not one per expert).
    std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(E));
    std::vector<std::vector<float>> weights_of(static_cast<size_t>(E));
    for (int64_t i = 0; i < n; ++i)
        for (int k = 0; k < K; ++k) {
            const int e = selected[i * K + k];
            if (e < w.expert_begin || e >= w.expert_end) continue;
            rows_of[e].push_back(i);
            weights_of[e].push_back(weights[i * K + k]);
        }
    for (int e = w.expert_begin; e < w.expert_end; ++e) {  // this rank's experts (all of them without EP)
        if (rows_of[e].empty()) continue;
        ExpertRows r{e, std::move(rows_of[e]), std::move(weights_of[e]), {}, {}, {}, {}, {}};
        const int64_t m = static_cast<int64_t>(r.rows.size());
        r.xin.resize(m * D);
        pool.parallel_for(static_cast<size_t>(m), [&](size_t j0, size_t j1, int) {
            for (size_t j = j0; j < j1; ++j) std::copy(x + r.rows[j] * D, x + r.rows[j] * D + D, r.xin.begin() + j * D);
        }, kRowGrain);
        r.gate.resize(m * I);
        r.up.resize(m * I);
        r.h.resize(m * I);
        r.eo.resize(m * D);
        batch.push_back(std::move(r));
        batch_rows += m;
        if (batch_rows >= kBatchRows) run_batch();
    }
    if (!batch.empty()) run_batch();

    // Expert parallelism: the partial sums of every rank's experts, added in fp32 (the reference's all_reduce);
    // under DP attention each rank gets back the sums of its own rows.
    if (plan_.dp_size > 1 && x != x_mine) {
        ScratchVector<float> mine(static_cast<size_t>(n_mine) * D);
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
    ScratchVector<bf16> gate, up, h, eo;
    gate.resize(n * Is);
    up.resize(n * Is);
    h.resize(n * Is);
    ops::linear_fp8(x_mine, n, w.shared_w1, gate.data());
    ops::linear_fp8(x_mine, n, w.shared_w3, up.data());
    ops::swiglu(gate.data(), up.data(), n, Is, limit, nullptr, h.data());
    if (w.shared_split) {
        ScratchVector<float> partial(n * D);
        ops::linear_fp8_f32(h.data(), n, w.shared_w2, partial.data());
        all_reduce(plan_.tp, partial.data(), partial.size());
        pool.parallel_for(static_cast<size_t>(n * D), [&](size_t i0, size_t i1, int) {
            for (size_t i = i0; i < i1; ++i) out[i] = float_to_bf16(y[i] + bf16_to_float(float_to_bf16(partial[i])));
        }, kRowGrain * D);
        return;
    }
    eo.resize(n * D);
    ops::linear_fp8(h.data(), n, w.shared_w2, eo.data());
    pool.parallel_for(static_cast<size_t>(n * D), [&](size_t i0, size_t i1, int) {
        for (size_t i = i0; i < i1; ++i) out[i] = float_to_bf16(y[i] + bf16_to_float(eo[i]));
    }, kRowGrain * D);
}

}  // namespace deepinfer::model
