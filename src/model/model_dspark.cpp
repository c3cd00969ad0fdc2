// DSpark (spec §7): the window records every backbone row leaves in the three DSpark rings, and one
// drafting pass: embed [sampled, noise...], three mHC blocks whose attention sees the ring (positions
// <= pos, slot order) plus all draft rows (bidirectional), the shared head, the sequential Markov bias,
// and the raw confidence logits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "core/quant_records.h"
#include "model/forward_state.h"
#include "ops/elementwise.h"
#include "ops/hyper_connection.h"
#include "ops/linear.h"

namespace deepinfer::model {
namespace {

// main_x = main_norm(main_proj(main_hidden)) for n rows (spec §7.2 step 1).
std::vector<bf16> dspark_main_x(const ModelConfig& c, const BlockWeights& stage0, const bf16* main_hidden, int64_t n) {
    const int D = c.hidden_size;
    std::vector<bf16> proj(n * D), main_x(n * D);
    ops::linear_fp8(main_hidden, n, stage0.main_proj, proj.data());
    ops::rms_norm(proj.data(), n, D, stage0.main_norm, static_cast<float>(c.rms_norm_eps), main_x.data());
    return main_x;
}

int32_t sample_token(const float* logits, int64_t vocab, float temperature, std::mt19937_64& rng) {
    if (temperature == 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
    // Gumbel-max / exponential race (spec §4.9): argmax p_i / E_i.
    float mx = *std::max_element(logits, logits + vocab);
    std::exponential_distribution<double> exp1(1.0);
    double best = -1.0;
    int32_t best_i = 0;
    const float t = std::max(temperature, 1e-5f);
    for (int64_t i = 0; i < vocab; ++i) {
        double p = std::exp((logits[i] - mx) / t);
        double v = p / exp1(rng);
        if (v > best) {
            best = v;
            best_i = static_cast<int32_t>(i);
        }
    }
    return best_i;
}

}  // namespace

void Model::write_dspark_rings(kv::KvPools& pools, const ForwardBatch& batch, const bf16* taps) {
    const ModelConfig& c = config_;
    const int D = c.hidden_size, hd = c.head_dim, rd = c.qk_rope_head_dim;
    const int64_t n = static_cast<int64_t>(batch.tokens.size());
    std::vector<bf16> main_x = dspark_main_x(c, weights_->blocks[c.num_hidden_layers], taps, n);
    std::vector<bf16> raw(n * hd), mk(n * hd);
    std::vector<float> row(hd);
    for (int stage = 0; stage < c.num_nextn_predict_layers; ++stage) {
        const int b = c.num_hidden_layers + stage;
        const BlockWeights& w = weights_->blocks[b];
        ops::linear_fp8(main_x.data(), n, w.wkv, raw.data());
        ops::rms_norm(raw.data(), n, hd, w.kv_norm, static_cast<float>(c.rms_norm_eps), mk.data());
        for (const SeqChunk& s : batch.seqs)
            for (int32_t r = 0; r < s.n_rows; ++r) {
                const int64_t i = s.row_begin + r, pos = s.start_pos + r;
                rope_for(b).apply(mk.data() + i * hd + (hd - rd), 1, hd, pos, false);
                ops::bf16_to_f32(mk.data() + i * hd, hd, row.data());
                pack_window_record(row.data(), hd, s.cache->window_record(pools, b, pos), nullptr);
            }
    }
    (void)D;
}

void Model::dspark_attention(kv::KvPools& pools, const DraftRequest& req, int b, const bf16* x, bf16* out) {
    const ModelConfig& c = config_;
    const BlockWeights& w = weights_->blocks[b];
    const ops::Rope& rope = rope_for(b);
    const int H = local_heads(), hd = c.head_dim, rd = c.qk_rope_head_dim, ql = c.q_lora_rank;
    const int W = c.sliding_window, B = c.dspark_block_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const int64_t p = req.pos;

    std::vector<bf16> qa(B * ql), qr(B * ql), q(B * H * hd), kva(B * hd), kvn(B * hd);
    ops::linear_fp8(x, B, w.wq_a, qa.data());
    ops::rms_norm(qa.data(), B, ql, w.q_norm, eps, qr.data());
    ops::linear_fp8(qr.data(), B, w.wq_b, q.data());
    ops::linear_fp8(x, B, w.wkv, kva.data());
    ops::rms_norm(kva.data(), B, hd, w.kv_norm, eps, kvn.data());
    for (int r = 0; r < B; ++r) {
        rope.apply(q.data() + r * H * hd + (hd - rd), H, hd, p + 1 + r, false);
        rope.apply(kvn.data() + r * hd + (hd - rd), 1, hd, p + 1 + r, false);
    }
    ops::act_qdq_rows(kvn.data(), B, hd);  // draft keys are QDQ'd but never stored

    // KV = ring slots 0..min(W-1, p) in slot order, then the draft rows; every row sees all of them.
    const int n_ring = static_cast<int>(std::min<int64_t>(W - 1, p) + 1);
    std::vector<bf16> kv_rows((n_ring + B) * hd);
    std::vector<float> row(hd);
    for (int slot = 0; slot < n_ring; ++slot) {
        const int64_t pos = p - ((p - slot) % W);
        unpack_window_record(req.cache->window_record(pools, b, pos), hd, row.data());
        ops::f32_to_bf16(row.data(), hd, kv_rows.data() + slot * hd);
    }
    std::copy(kvn.begin(), kvn.end(), kv_rows.begin() + n_ring * hd);
    const int topk = n_ring + B;
    std::vector<int32_t> idx(B * topk);
    for (int r = 0; r < B; ++r)
        for (int e = 0; e < topk; ++e) idx[r * topk + e] = e;
    std::vector<bf16> o(B * H * hd);
    const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));
    backend::active_kernels().sparse_attn(q.data(), B, H, hd, kv_rows.data(), idx.data(), topk, w.attn_sink, scale,
                                          o.data(), ThreadPool::global());
    for (int r = 0; r < B; ++r) rope.apply(o.data() + r * H * hd + (hd - rd), H, hd, p + 1 + r, true);

    output_projection(w, o.data(), B, out);
}

Status Model::draft(kv::KvPools& pools, const DraftRequest& req, DraftOutput* out) {
    const ModelConfig& c = config_;
    if (!c.has_dspark()) return error(StatusCode::kUnsupported, "this checkpoint has no DSpark blocks");
    if (req.cache == nullptr || req.pos < 0 || req.cache->length() <= req.pos)
        return invalid_argument("draft at position {}: the backbone has not processed that position", req.pos);
    if (req.sampled_token < 0 || req.sampled_token >= c.vocab_size)
        return invalid_argument("draft: token {} is outside the vocabulary", req.sampled_token);
    const int D = c.hidden_size, hc = c.hc_mult, B = c.dspark_block_size;
    const int64_t V = c.vocab_size;

    std::vector<bf16> stream(B * hc * D);
    for (int r = 0; r < B; ++r) {
        int32_t id = r == 0 ? req.sampled_token : c.dspark_noise_token_id;
        for (int cpy = 0; cpy < hc; ++cpy)
            std::memcpy(stream.data() + (r * hc + cpy) * D, weights_->embed + static_cast<int64_t>(id) * D, D * sizeof(bf16));
    }
    std::vector<float> pre_in(B * hc, 0.0f);
    for (int r = 0; r < B; ++r) pre_in[r * hc] = 1.0f;
    for (int stage = 0; stage < c.num_nextn_predict_layers; ++stage) {
        const int b = c.num_hidden_layers + stage;
        run_block(b, stream.data(), pre_in.data(), B,
                  [&](const bf16* x, bf16* o) { dspark_attention(pools, req, b, x, o); });
    }

    // Head on the collapsed stream (last stage's pre-mix), with the last stage's norm.
    const BlockWeights& last = weights_->blocks[c.n_blocks() - 1];
    std::vector<bf16> y(B * D), normed(B * D);
    ops::hc_collapse(stream.data(), B, pre_in.data(), hc, D, y.data());
    ops::rms_norm(y.data(), B, D, last.dspark_norm, static_cast<float>(c.rms_norm_eps), normed.data());
    std::vector<float> nf(B * D);
    ops::bf16_to_f32(normed.data(), B * D, nf.data());
    out->logits.assign(B * V, 0.0f);
    lm_head(nf.data(), B, out->logits.data());

    // Sequential Markov bias: row i's bias depends on the token sampled from row i-1.
    const int rank = c.dspark_markov_rank;
    out->tokens.assign(B + 1, 0);
    out->tokens[0] = req.sampled_token;
    out->confidence.assign(B, 0.0f);
    std::mt19937_64 rng(req.seed);
    std::vector<float> e(rank), bias(V), features(D + rank);
    for (int i = 0; i < B; ++i) {
        const bf16* emb = last.markov_embed.data + static_cast<int64_t>(out->tokens[i]) * rank;
        ops::bf16_to_f32(emb, rank, e.data());
        ops::linear_f32(e.data(), 1, last.markov_head, bias.data());
        float* li = out->logits.data() + i * V;
        for (int64_t v = 0; v < V; ++v) li[v] += bias[v];
        out->tokens[i + 1] = sample_token(li, V, req.temperature, rng);
        // Confidence: proj . [y_i ; e_i] (pre-norm collapsed hidden, Markov embedding of the row's input).
        ops::bf16_to_f32(y.data() + i * D, D, features.data());
        std::copy(e.begin(), e.end(), features.begin() + D);
        ops::linear_f32(features.data(), 1, last.confidence_proj, &out->confidence[i]);
    }
    return comm_status_;
}

}  // namespace deepinfer::model
