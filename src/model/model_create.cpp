// Model construction from a config, a census-checked tensor store and the Engram token map; the cache
// layout the config implies.
#include <algorithm>

#include "core/log.h"
#include "core/quant_records.h"
#include "model/model.h"
#include "ops/linear.h"

namespace deepinfer::model {

kv::CacheLayout make_cache_layout(const ModelConfig& c, int block_tokens) {
    kv::CacheLayout L;
    L.block_tokens = block_tokens;
    L.window = c.sliding_window;
    L.n_window_layers = c.n_blocks();
    L.head_dim = c.head_dim;
    L.index_head_dim = c.index_head_dim;
    L.window_record_bytes = window_record_bytes(c.head_dim);
    L.compressed_record_bytes = compressed_record_bytes(c.head_dim);
    L.index_record_bytes = index_key_record_bytes(c.index_head_dim);
    L.window_block_bytes = static_cast<size_t>(L.n_window_layers) * block_tokens * L.window_record_bytes;
    L.source_of_layer.assign(c.num_hidden_layers, -1);
    size_t offset = 0;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        if (!c.roles[l].kv_source) continue;
        kv::KvSourceLayout s;
        s.layer = l;
        s.ratio = c.roles[l].compress_ratio;
        const size_t entries = static_cast<size_t>(block_tokens / s.ratio);
        s.kv_offset = offset;
        offset += entries * L.compressed_record_bytes;
        s.index_offset = offset;
        offset += entries * L.index_record_bytes;
        L.sources.push_back(s);
    }
    for (int l = 0; l < c.num_hidden_layers; ++l)
        for (size_t i = 0; i < L.sources.size(); ++i)
            if (L.sources[i].layer == c.roles[l].kv_source_layer) L.source_of_layer[l] = static_cast<int>(i);
    L.compressed_block_bytes = offset;
    return L;
}

Expected<std::unique_ptr<Model>> Model::create(ModelConfig config, std::unique_ptr<loader::TensorStore> store,
                                               std::vector<int32_t> engram_token_map, const ParallelPlan& plan) {
    std::unique_ptr<Model> m(new Model());
    m->config_ = std::move(config);
    const ModelConfig& c = m->config_;
    // TP shards whole wo_a groups (and their heads); EP whole experts. Quantization blocks stay whole.
    if (plan.dp_size > 1 && (plan.dp == nullptr || plan.ep_size != plan.dp_size || plan.tp_size != 1))
        return invalid_argument("parallel plan: DP attention over {} ranks needs ep == dp and tp == 1", plan.dp_size);
    if (plan.tp_size < 1 || plan.ep_size < 1 || (plan.tp_size > 1 && !plan.tp) || (plan.ep_size > 1 && !plan.ep))
        return invalid_argument("parallel plan: tp {} / ep {} without communicators", plan.tp_size, plan.ep_size);
    if (c.o_groups % plan.tp_size != 0)
        return invalid_argument("--tp {}: must divide o_groups {} (each rank owns whole output groups)", plan.tp_size,
                                c.o_groups);
    if ((int64_t{c.num_attention_heads} / plan.tp_size * c.head_dim) % 32 != 0 ||
        (int64_t{c.o_groups} / plan.tp_size * c.o_lora_rank) % 32 != 0)
        return invalid_argument("--tp {}: the per-rank slices of wq_b / wo_b are not whole 32x32 blocks", plan.tp_size);
    for (int b = 0; b < c.n_blocks(); ++b)
        if (c.roles[b].n_routed_experts % plan.ep_size != 0)
            return invalid_argument("--ep {}: must divide the {} experts of {}", plan.ep_size, c.roles[b].n_routed_experts,
                                    c.block_prefix(b));
    m->plan_ = plan;
    DI_ASSIGN_OR_RETURN(m->weights_, bind_weights(c, std::move(store), plan));
    m->layout_ = make_cache_layout(c);
    if (!c.engram_layer_ids.empty()) {
        if (static_cast<int64_t>(engram_token_map.size()) < c.vocab_size)
            return invalid_argument("Engram token map has {} entries for a vocabulary of {}", engram_token_map.size(),
                                    c.vocab_size);
        int32_t n_classes = 0;
        for (int32_t id : engram_token_map) n_classes = std::max(n_classes, id + 1);
        if (n_classes != c.engram_compressed_vocab_size)
            return invalid_argument("config.json: text_config.engram_compressed_vocab_size is {} but the tokenizer "
                                    "yields {} compressed classes (spec §5.5.1)", c.engram_compressed_vocab_size,
                                    n_classes);
        m->token_map_ = std::move(engram_token_map);
        m->engram_pad_cid_ = m->token_map_[c.engram_pad_token_id];
        m->engram_layout_ = make_engram_layout(c);
    }
    ops::RopeParams plain{c.qk_rope_head_dim, c.rope_theta, 0, 1.0, c.rope_scaling.beta_fast, c.rope_scaling.beta_slow};
    ops::RopeParams yarn{c.qk_rope_head_dim, c.compress_rope_theta, c.rope_scaling.original_max_position_embeddings,
                         c.rope_scaling.factor, c.rope_scaling.beta_fast, c.rope_scaling.beta_slow};
    m->rope_plain_ = ops::Rope(plain);
    m->rope_yarn_ = ops::Rope(yarn);
    return m;
}

template <typename T>
void Model::tp_column_parallel(int64_t n, int64_t total, const std::function<void(T*)>& compute_mine, T* out,
                               const char* what) {
    const int tp = plan_.tp_size;
    std::vector<size_t> bytes(tp);
    for (int r = 0; r < tp; ++r) {
        const auto [c0, c1] = head_rows(total, r, tp);
        bytes[r] = static_cast<size_t>(n * (c1 - c0)) * sizeof(T);
    }
    std::vector<T> gathered(static_cast<size_t>(n * total));  // [rank][n][columns of that rank]
    T* mine = gathered.data() + n * head_rows(total, plan_.tp_rank, tp).first;  // this rank's slot (in place)
    compute_mine(mine);
    if (comm_status_.is_ok()) {
        Status s = plan_.tp->all_gather_v(mine, bytes, gathered.data());
        if (!s.is_ok()) comm_status_ = s.with_context(what);
    }
    for (int r = 0; r < tp; ++r) {
        const auto [c0, c1] = head_rows(total, r, tp);
        const T* block = gathered.data() + n * c0;
        for (int64_t i = 0; i < n; ++i) std::copy(block + i * (c1 - c0), block + (i + 1) * (c1 - c0), out + i * total + c0);
    }
}

void Model::lm_head(const float* x, int64_t n, float* logits) {
    if (plan_.tp_size == 1 || plan_.tp == nullptr) {
        ops::linear_f32(x, n, weights_->head, logits);
        return;
    }
    tp_column_parallel<float>(
        n, config_.vocab_size, [&](float* mine) { ops::linear_f32(x, n, weights_->head, mine); }, logits,
        "LM head all-gather");
}

void Model::engram_projection(const BlockWeights& w, const bf16* x, int64_t n, bf16* kv) {
    if (!w.engram_wkv_split) {
        ops::linear_fp8(x, n, w.engram_wkv, kv);
        return;
    }
    const int64_t total = w.engram_wkv.rows * plan_.tp_size;
    tp_column_parallel<bf16>(
        n, total, [&](bf16* mine) { ops::linear_fp8(x, n, w.engram_wkv, mine); }, kv, "Engram projection all-gather");
}

void Model::all_reduce(dist::Comm* comm, float* data, size_t count) {
    if (comm == nullptr || !comm_status_.is_ok()) return;
    Status s = comm->all_reduce_sum(data, count);
    if (!s.is_ok()) comm_status_ = s.with_context("model all-reduce");
}

}  // namespace deepinfer::model
