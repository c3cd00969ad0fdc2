// Parsing, validation and serialisation of the nested HF config.json (spec §2.1-§2.5).
#include "model/config.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/check.h"
#include "model/engram_hash.h"

namespace deepinfer::model {
namespace {

using nlohmann::json;

// Reads typed fields out of one JSON object, remembering the first error with its full path.
class FieldReader {
   public:
    FieldReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

    template <typename T>
    void get(const char* key, T* out, bool required = false) {
        if (!status_.is_ok()) return;
        auto it = object_.find(key);
        if (it == object_.end() || it->is_null()) {
            if (required) status_ = invalid_argument("{}.{}: required field is missing", path_, key);
            return;
        }
        try {
            convert(*it, out);
        } catch (const std::exception& e) {
            status_ = invalid_argument("{}.{}: {} (got {})", path_, key, expected_name(out), it->dump());
        }
    }
    const Status& status() const { return status_; }

   private:
    static void convert(const json& v, int* out) {
        if (!v.is_number_integer()) throw std::runtime_error("int");
        *out = v.get<int>();
    }
    static void convert(const json& v, int64_t* out) {
        if (!v.is_number_integer()) throw std::runtime_error("int");
        *out = v.get<int64_t>();
    }
    static void convert(const json& v, double* out) {
        if (!v.is_number()) throw std::runtime_error("number");
        *out = v.get<double>();
    }
    static void convert(const json& v, bool* out) {
        if (!v.is_boolean()) throw std::runtime_error("bool");
        *out = v.get<bool>();
    }
    static void convert(const json& v, std::string* out) {
        if (!v.is_string()) throw std::runtime_error("string");
        *out = v.get<std::string>();
    }
    template <typename T>
    static void convert(const json& v, std::vector<T>* out) {
        if (!v.is_array()) throw std::runtime_error("array");
        out->clear();
        for (const auto& item : v) {
            T value;
            convert(item, &value);
            out->push_back(value);
        }
    }
    static const char* expected_name(int*) { return "expected an integer"; }
    static const char* expected_name(int64_t*) { return "expected an integer"; }
    static const char* expected_name(double*) { return "expected a number"; }
    static const char* expected_name(bool*) { return "expected true or false"; }
    static const char* expected_name(std::string*) { return "expected a string"; }
    template <typename T>
    static const char* expected_name(std::vector<T>*) {
        return "expected an array of numbers";
    }

    const json& object_;
    std::string path_;
    Status status_;
};

Status read_text_config(const json& text, const std::string& path, ModelConfig* c) {
    if (!text.is_object()) return invalid_argument("{}: expected an object", path);
    FieldReader r(text, path);
    r.get("vocab_size", &c->vocab_size, true);
    r.get("hidden_size", &c->hidden_size, true);
    r.get("num_hidden_layers", &c->num_hidden_layers, true);
    r.get("num_attention_heads", &c->num_attention_heads, true);
    r.get("num_key_value_heads", &c->num_key_value_heads);
    r.get("head_dim", &c->head_dim, true);
    r.get("qk_rope_head_dim", &c->qk_rope_head_dim, true);
    r.get("q_lora_rank", &c->q_lora_rank, true);
    r.get("o_lora_rank", &c->o_lora_rank, true);
    r.get("o_groups", &c->o_groups, true);
    r.get("moe_intermediate_size", &c->moe_intermediate_size, true);
    r.get("n_routed_experts", &c->n_routed_experts, true);
    r.get("n_shared_experts", &c->n_shared_experts);
    r.get("num_experts_per_tok", &c->num_experts_per_tok, true);
    std::string scoring = "sqrtsoftplus";
    r.get("scoring_func", &scoring);
    r.get("topk_method", &c->topk_method);
    r.get("norm_topk_prob", &c->norm_topk_prob);
    r.get("routed_scaling_factor", &c->routed_scaling_factor);
    r.get("hidden_act", &c->hidden_act);
    r.get("swiglu_limit", &c->swiglu_limit);
    r.get("rms_norm_eps", &c->rms_norm_eps, true);
    r.get("gate_temp", &c->gate_temp);
    r.get("max_position_embeddings", &c->max_position_embeddings);
    r.get("rope_theta", &c->rope_theta);
    r.get("sliding_window", &c->sliding_window, true);
    r.get("compress_ratios", &c->compress_ratios, true);
    r.get("compress_rope_theta", &c->compress_rope_theta);
    r.get("kv_source_layer_ids", &c->kv_source_layer_ids, true);
    r.get("index_source_layer_ids", &c->index_source_layer_ids, true);
    r.get("index_n_heads", &c->index_n_heads);
    r.get("index_head_dim", &c->index_head_dim);
    r.get("index_topk", &c->index_topk);
    r.get("candidate_source_layer_id", &c->candidate_source_layer_id);
    r.get("candidate_topk_blocks", &c->candidate_topk_blocks);
    r.get("candidate_block_size", &c->candidate_block_size);
    r.get("hc_mult", &c->hc_mult);
    r.get("hc_sinkhorn_iters", &c->hc_sinkhorn_iters);
    r.get("hc_eps", &c->hc_eps);
    r.get("engram_layer_ids", &c->engram_layer_ids);
    r.get("engram_num_embeddings", &c->engram_num_embeddings);
    r.get("engram_max_ngram_size", &c->engram_max_ngram_size);
    r.get("engram_vocab_size", &c->engram_vocab_size);
    r.get("engram_n_heads", &c->engram_n_heads);
    r.get("engram_head_dim", &c->engram_head_dim);
    r.get("engram_pad_token_id", &c->engram_pad_token_id);
    r.get("engram_compressed_vocab_size", &c->engram_compressed_vocab_size);
    r.get("num_nextn_predict_layers", &c->num_nextn_predict_layers);
    r.get("dspark_block_size", &c->dspark_block_size);
    r.get("dspark_noise_token_id", &c->dspark_noise_token_id);
    r.get("dspark_target_layer_ids", &c->dspark_target_layer_ids);
    r.get("dspark_markov_rank", &c->dspark_markov_rank);
    r.get("dspark_n_routed_experts", &c->dspark_n_routed_experts);
    r.get("dspark_num_experts_per_tok", &c->dspark_num_experts_per_tok);
    r.get("bos_token_id", &c->bos_token_id);
    r.get("eos_token_id", &c->eos_token_id);
    r.get("pad_token_id", &c->pad_token_id);
    DI_RETURN_IF_ERROR(r.status());
    if (scoring == "sqrtsoftplus") c->scoring_func = ScoringFunc::kSqrtSoftplus;
    else if (scoring == "softmax") c->scoring_func = ScoringFunc::kSoftmax;
    else if (scoring == "sigmoid") c->scoring_func = ScoringFunc::kSigmoid;
    else return invalid_argument("{}.scoring_func: expected sqrtsoftplus, softmax or sigmoid, got \"{}\"", path, scoring);
    if (auto it = text.find("rope_scaling"); it != text.end() && !it->is_null()) {
        FieldReader rs(*it, path + ".rope_scaling");
        rs.get("rope_type", &c->rope_scaling.type);
        rs.get("type", &c->rope_scaling.type);
        rs.get("factor", &c->rope_scaling.factor, true);
        rs.get("beta_fast", &c->rope_scaling.beta_fast);
        rs.get("beta_slow", &c->rope_scaling.beta_slow);
        rs.get("original_max_position_embeddings", &c->rope_scaling.original_max_position_embeddings, true);
        DI_RETURN_IF_ERROR(rs.status());
    } else {
        c->rope_scaling.original_max_position_embeddings = 0;  // no YaRN anywhere
    }
    for (const char* absent : {"first_k_dense_replace", "num_hash_layers", "n_group", "topk_group"}) {
        auto it = text.find(absent);
        if (it != text.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0) &&
            !(std::string(absent) == "n_group" && it->is_number() && it->get<double>() == 1) &&
            !(std::string(absent) == "topk_group" && it->is_number() && it->get<double>() == 1))
            return invalid_argument("{}.{}: DeepSeek-V4.1 has no {} (spec §2.2), got {}", path, absent, absent,
                                    it->dump());
    }
    return Status::ok();
}

Status check(bool ok, const std::string& message) {
    return ok ? Status::ok() : Status(StatusCode::kInvalidArgument, message);
}

bool sorted_unique(const std::vector<int>& v) {
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] <= v[i - 1]) return false;
    return true;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

std::string ModelConfig::block_prefix(int block) const {
    if (block < num_hidden_layers) return fmt::format("layers.{}", block);
    return fmt::format("mtp.{}", block - num_hidden_layers);
}

Status ModelConfig::finalize() {
    const std::string p = "text_config";
    auto positive = [&](const char* name, int64_t v) {
        return check(v > 0, fmt::format("{}.{}: must be positive, got {}", p, name, v));
    };
    DI_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
    DI_RETURN_IF_ERROR(positive("hidden_size", hidden_size));
    DI_RETURN_IF_ERROR(positive("num_hidden_layers", num_hidden_layers));
    DI_RETURN_IF_ERROR(positive("num_attention_heads", num_attention_heads));
    DI_RETURN_IF_ERROR(positive("head_dim", head_dim));
    DI_RETURN_IF_ERROR(positive("q_lora_rank", q_lora_rank));
    DI_RETURN_IF_ERROR(positive("o_lora_rank", o_lora_rank));
    DI_RETURN_IF_ERROR(positive("o_groups", o_groups));
    DI_RETURN_IF_ERROR(positive("moe_intermediate_size", moe_intermediate_size));
    DI_RETURN_IF_ERROR(positive("n_routed_experts", n_routed_experts));
    DI_RETURN_IF_ERROR(positive("num_experts_per_tok", num_experts_per_tok));
    DI_RETURN_IF_ERROR(positive("sliding_window", sliding_window));
    DI_RETURN_IF_ERROR(positive("hc_mult", hc_mult));
    DI_RETURN_IF_ERROR(positive("hc_sinkhorn_iters", hc_sinkhorn_iters));
    // Quantized dims: fp8 weights use 32x32 blocks, activations 1x32 groups, MXFP4 1x32 (spec §3.2).
    for (auto [name, v] : {std::pair<const char*, int>{"hidden_size", hidden_size}, {"q_lora_rank", q_lora_rank},
                           {"o_lora_rank", o_lora_rank}, {"moe_intermediate_size", moe_intermediate_size},
                           {"head_dim", head_dim}})
        DI_RETURN_IF_ERROR(check(v % 32 == 0, fmt::format("{}.{}: must be a multiple of 32 (fp8 1x32 activation "
                                                          "groups, spec §4.2), got {}", p, name, v)));
    DI_RETURN_IF_ERROR(check(num_key_value_heads == 1,
                             fmt::format("{}.num_key_value_heads: V4.1 attention has one shared latent (MQA), got {}",
                                         p, num_key_value_heads)));
    DI_RETURN_IF_ERROR(check(qk_rope_head_dim > 0 && qk_rope_head_dim % 2 == 0 && qk_rope_head_dim <= head_dim,
                             fmt::format("{}.qk_rope_head_dim: must be even and in (0, head_dim={}], got {}", p,
                                         head_dim, qk_rope_head_dim)));
    DI_RETURN_IF_ERROR(check(num_attention_heads % o_groups == 0,
                             fmt::format("{}.o_groups: {} does not divide num_attention_heads {}", p, o_groups,
                                         num_attention_heads)));
    DI_RETURN_IF_ERROR(check(num_attention_heads * head_dim / o_groups % 32 == 0,
                             fmt::format("{}: wo_a input width heads*head_dim/o_groups must be a multiple of 32", p)));
    DI_RETURN_IF_ERROR(check(num_experts_per_tok <= n_routed_experts,
                             fmt::format("{}.num_experts_per_tok: {} exceeds n_routed_experts {}", p,
                                         num_experts_per_tok, n_routed_experts)));
    DI_RETURN_IF_ERROR(check(n_shared_experts == 1, fmt::format("{}.n_shared_experts: the reference requires exactly "
                                                                "1, got {}", p, n_shared_experts)));
    DI_RETURN_IF_ERROR(check(topk_method == "noaux_tc", fmt::format("{}.topk_method: expected \"noaux_tc\", got \"{}\"",
                                                                    p, topk_method)));
    DI_RETURN_IF_ERROR(check(hidden_act == "silu", fmt::format("{}.hidden_act: expected \"silu\", got \"{}\"", p,
                                                               hidden_act)));
    DI_RETURN_IF_ERROR(check(rms_norm_eps >= 0, fmt::format("{}.rms_norm_eps: must be >= 0", p)));
    DI_RETURN_IF_ERROR(check(gate_temp > 0, fmt::format("{}.gate_temp: must be > 0", p)));
    if (rope_scaling.original_max_position_embeddings > 0) {
        DI_RETURN_IF_ERROR(check(rope_scaling.type == "yarn", fmt::format("{}.rope_scaling.rope_type: only \"yarn\" "
                                                                          "is defined for V4.1, got \"{}\"", p,
                                                                          rope_scaling.type)));
        DI_RETURN_IF_ERROR(check(rope_scaling.factor >= 1, fmt::format("{}.rope_scaling.factor: must be >= 1", p)));
    }

    // Quantization block (top level, spec §2.1: a loader reading text_config alone loses it).
    const auto& q = quantization;
    DI_RETURN_IF_ERROR(check(q.quant_method == "fp8", fmt::format("quantization_config.quant_method: expected "
                                                                  "\"fp8\", got \"{}\"", q.quant_method)));
    DI_RETURN_IF_ERROR(check(q.weight_block_size == std::vector<int>({32, 32}),
                             "quantization_config.weight_block_size: V4.1 uses [32, 32] blocks (spec §3.2)"));
    DI_RETURN_IF_ERROR(check(q.scale_fmt == "ue8m0", fmt::format("quantization_config.scale_fmt: expected \"ue8m0\", "
                                                                 "got \"{}\"", q.scale_fmt)));
    DI_RETURN_IF_ERROR(check(q.expert_dtype == "fp4", fmt::format("quantization_config.expert_dtype: expected \"fp4\" "
                                                                  "(MXFP4 experts), got \"{}\"", q.expert_dtype)));

    // Layer lists (spec §2.5).
    const int n_layers = num_hidden_layers, n_total = n_blocks();
    DI_RETURN_IF_ERROR(check(num_nextn_predict_layers >= 0, fmt::format("{}.num_nextn_predict_layers: must be >= 0", p)));
    DI_RETURN_IF_ERROR(check(static_cast<int>(compress_ratios.size()) == n_total,
                             fmt::format("{}.compress_ratios: expected {} entries (num_hidden_layers {} + "
                                         "num_nextn_predict_layers {}), got {}", p, n_total, n_layers,
                                         num_nextn_predict_layers, compress_ratios.size())));
    for (int l = 0; l < n_total; ++l) {
        int r = compress_ratios[l];
        DI_RETURN_IF_ERROR(check(r == 0 || r == 1 || r == 2, fmt::format("{}.compress_ratios[{}]: V4.1 ratios are 0, "
                                                                         "1 or 2, got {}", p, l, r)));
        if (l >= n_layers)
            DI_RETURN_IF_ERROR(check(r == 0, fmt::format("{}.compress_ratios[{}]: DSpark block {} must have ratio 0, "
                                                         "got {}", p, l, l - n_layers, r)));
    }
    for (auto [name, list] : {std::pair<const char*, const std::vector<int>*>{"kv_source_layer_ids", &kv_source_layer_ids},
                              {"index_source_layer_ids", &index_source_layer_ids},
                              {"engram_layer_ids", &engram_layer_ids},
                              {"dspark_target_layer_ids", &dspark_target_layer_ids}}) {
        DI_RETURN_IF_ERROR(check(sorted_unique(*list), fmt::format("{}.{}: must be strictly increasing", p, name)));
        for (int l : *list)
            DI_RETURN_IF_ERROR(check(l >= 0 && l < n_layers, fmt::format("{}.{}: layer {} is not a backbone layer "
                                                                         "(0..{})", p, name, l, n_layers - 1)));
    }
    for (int l : kv_source_layer_ids)
        DI_RETURN_IF_ERROR(check(compress_ratios[l] != 0, fmt::format("{}.kv_source_layer_ids: layer {} has "
                                                                      "compress_ratio 0, a kv source needs ratio 1 or 2",
                                                                      p, l)));
    for (int l : index_source_layer_ids)
        DI_RETURN_IF_ERROR(check(compress_ratios[l] != 0, fmt::format("{}.index_source_layer_ids: layer {} has "
                                                                      "compress_ratio 0, an index source needs ratio 1 "
                                                                      "or 2", p, l)));
    if (candidate_source_layer_id >= 0) {
        DI_RETURN_IF_ERROR(check(contains(index_source_layer_ids, candidate_source_layer_id),
                                 fmt::format("{}.candidate_source_layer_id: layer {} is not an index source", p,
                                             candidate_source_layer_id)));
        DI_RETURN_IF_ERROR(check(candidate_block_size > 0 && candidate_topk_blocks > 0,
                                 fmt::format("{}: candidate_block_size and candidate_topk_blocks must be positive when "
                                             "candidate_source_layer_id is set", p)));
        // Enough candidates for a full top-k (spec §5.3.6: 2048*8 - 7 >= 512): otherwise top-k would pick
        // masked (-inf) entries that are still within reach.
        DI_RETURN_IF_ERROR(check(int64_t{candidate_topk_blocks} * candidate_block_size - (candidate_block_size - 1) >=
                                     index_topk,
                                 fmt::format("{}: candidate_topk_blocks*candidate_block_size - (block_size-1) = {} is "
                                             "less than index_topk {}", p,
                                             candidate_topk_blocks * candidate_block_size - (candidate_block_size - 1),
                                             index_topk)));
    }
    bool any_compressed = false;
    for (int l = 0; l < n_layers; ++l) any_compressed |= compress_ratios[l] != 0;
    if (any_compressed) {
        DI_RETURN_IF_ERROR(positive("index_n_heads", index_n_heads));
        DI_RETURN_IF_ERROR(positive("index_topk", index_topk));
        DI_RETURN_IF_ERROR(check(index_head_dim > 0 && index_head_dim % 32 == 0 && index_head_dim >= qk_rope_head_dim,
                                 fmt::format("{}.index_head_dim: must be a multiple of 32 (fp4 groups) and >= "
                                             "qk_rope_head_dim, got {}", p, index_head_dim)));
        DI_RETURN_IF_ERROR(check(head_dim % 16 == 0, fmt::format("{}.head_dim: compressed KV uses fp4 groups of 16", p)));
    }

    // Engram (spec §5.5).
    if (!engram_layer_ids.empty()) {
        DI_RETURN_IF_ERROR(check(engram_num_embeddings.size() == engram_layer_ids.size(),
                                 fmt::format("{}.engram_num_embeddings: {} entries for {} engram layers", p,
                                             engram_num_embeddings.size(), engram_layer_ids.size())));
        DI_RETURN_IF_ERROR(check(engram_max_ngram_size >= 2, fmt::format("{}.engram_max_ngram_size: must be >= 2", p)));
        DI_RETURN_IF_ERROR(positive("engram_n_heads", engram_n_heads));
        DI_RETURN_IF_ERROR(check(engram_head_dim > 0 && engram_head_dim % 32 == 0,
                                 fmt::format("{}.engram_head_dim: must be a multiple of 32 (1x32 row scales), got {}",
                                             p, engram_head_dim)));
        DI_RETURN_IF_ERROR(check(engram_vocab_size >= 2, fmt::format("{}.engram_vocab_size: must be >= 2", p)));
        DI_RETURN_IF_ERROR(positive("engram_compressed_vocab_size", engram_compressed_vocab_size));
        DI_RETURN_IF_ERROR(check(engram_pad_token_id >= 0 && engram_pad_token_id < vocab_size,
                                 fmt::format("{}.engram_pad_token_id: {} is outside the vocabulary", p,
                                             engram_pad_token_id)));
        // Table rows must equal the sum of the layer's primes (spec §11 self-check).
        EngramLayout layout = make_engram_layout(*this);
        for (size_t i = 0; i < engram_layer_ids.size(); ++i)
            DI_RETURN_IF_ERROR(check(layout.table_rows[i] == engram_num_embeddings[i],
                                     fmt::format("{}.engram_num_embeddings[{}]: {} rows, but the hash layout of "
                                                 "engram_vocab_size {} needs {}", p, i, engram_num_embeddings[i],
                                                 engram_vocab_size, layout.table_rows[i])));
    }

    // DSpark (spec §7).
    if (num_nextn_predict_layers > 0) {
        DI_RETURN_IF_ERROR(positive("dspark_block_size", dspark_block_size));
        DI_RETURN_IF_ERROR(check(!dspark_target_layer_ids.empty(), fmt::format("{}.dspark_target_layer_ids: DSpark "
                                                                               "needs target layers", p)));
        DI_RETURN_IF_ERROR(check(dspark_noise_token_id >= 0 && dspark_noise_token_id < vocab_size,
                                 fmt::format("{}.dspark_noise_token_id: {} is outside the vocabulary", p,
                                             dspark_noise_token_id)));
        DI_RETURN_IF_ERROR(positive("dspark_markov_rank", dspark_markov_rank));
        int e = dspark_n_routed_experts ? dspark_n_routed_experts : n_routed_experts;
        int k = dspark_num_experts_per_tok ? dspark_num_experts_per_tok : num_experts_per_tok;
        DI_RETURN_IF_ERROR(check(k <= e, fmt::format("{}.dspark_num_experts_per_tok: {} exceeds {} experts", p, k, e)));
    }
    for (auto [name, id] : {std::pair<const char*, int32_t>{"bos_token_id", bos_token_id},
                            {"eos_token_id", eos_token_id}})
        DI_RETURN_IF_ERROR(check(id >= 0 && id < vocab_size, fmt::format("{}: {} is outside the vocabulary", name, id)));

    // Roles: each ratio != 0 layer reads the most recent kv source and index source at or before it, and
    // those must have the same ratio (the compressed positions are counted with it).
    roles.assign(n_total, LayerRole{});
    int last_kv = -1, last_index = -1;
    for (int l = 0; l < n_total; ++l) {
        LayerRole& role = roles[l];
        role.compress_ratio = compress_ratios[l];
        role.is_dspark = l >= n_layers;
        role.yarn = role.compress_ratio != 0 && rope_scaling.original_max_position_embeddings > 0;
        role.n_routed_experts = role.is_dspark && dspark_n_routed_experts ? dspark_n_routed_experts : n_routed_experts;
        role.n_activated_experts =
            role.is_dspark && dspark_num_experts_per_tok ? dspark_num_experts_per_tok : num_experts_per_tok;
        if (role.is_dspark) continue;
        role.kv_source = contains(kv_source_layer_ids, l);
        role.index_source = contains(index_source_layer_ids, l);
        role.candidate_source = l == candidate_source_layer_id;
        role.uses_candidates = role.index_source && candidate_source_layer_id >= 0 && l > candidate_source_layer_id;
        auto engram_it = std::find(engram_layer_ids.begin(), engram_layer_ids.end(), l);
        role.engram = engram_it != engram_layer_ids.end();
        role.engram_index = role.engram ? static_cast<int>(engram_it - engram_layer_ids.begin()) : -1;
        if (role.kv_source) last_kv = l;
        if (role.index_source) last_index = l;
        if (role.compress_ratio == 0) continue;
        DI_RETURN_IF_ERROR(check(last_kv >= 0, fmt::format("{}: layer {} has compress_ratio {} but no kv source at or "
                                                           "before it (kv_source_layer_ids)", p, l,
                                                           role.compress_ratio)));
        DI_RETURN_IF_ERROR(check(compress_ratios[last_kv] == role.compress_ratio,
                                 fmt::format("{}: layer {} (ratio {}) would read the compressed KV of layer {} (ratio "
                                             "{})", p, l, role.compress_ratio, last_kv, compress_ratios[last_kv])));
        DI_RETURN_IF_ERROR(check(last_index >= 0, fmt::format("{}: layer {} has compress_ratio {} but no index source "
                                                              "at or before it (index_source_layer_ids)", p, l,
                                                              role.compress_ratio)));
        DI_RETURN_IF_ERROR(check(compress_ratios[last_index] == role.compress_ratio,
                                 fmt::format("{}: layer {} (ratio {}) would reuse the top-k of layer {} (ratio {})", p,
                                             l, role.compress_ratio, last_index, compress_ratios[last_index])));
        role.kv_source_layer = last_kv;
        role.index_source_layer = last_index;
    }
    if (candidate_source_layer_id >= 0)
        DI_RETURN_IF_ERROR(check(roles[candidate_source_layer_id].kv_source,
                                 fmt::format("{}.candidate_source_layer_id: layer {} must also be a kv source (its "
                                             "scores cover the compressed positions it owns)", p,
                                             candidate_source_layer_id)));
    return Status::ok();
}

ModelConfig ModelConfig::released() {
    ModelConfig c;
    c.compress_ratios = {0, 0};
    for (int i = 0; i < 18; ++i) c.compress_ratios.push_back(2);
    for (int i = 0; i < 20; ++i) c.compress_ratios.push_back(1);
    for (int i = 0; i < 3; ++i) c.compress_ratios.push_back(0);
    c.kv_source_layer_ids = {2, 8, 14, 20};
    c.index_source_layer_ids = {2, 8, 14, 20, 24, 28, 32, 36};
    c.candidate_source_layer_id = 20;
    c.candidate_topk_blocks = 2048;
    c.candidate_block_size = 8;
    c.engram_layer_ids = {1, 14};
    c.engram_num_embeddings = {384006168, 384016682};
    c.dspark_target_layer_ids = {37, 38, 39};
    Status status = c.finalize();
    DI_CHECK_MSG(status.is_ok(), "released config: {}", status.to_string());
    return c;
}

Expected<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double
        return invalid_argument("{}: not valid JSON: {}", source, e.what());
    }
    if (!root.is_object()) return invalid_argument("{}: expected a JSON object", source);
    ModelConfig c;
    // The nested layout is required: a flat config carries no quantization_config (spec §2.1).
    auto text = root.find("text_config");
    if (text == root.end())
        return invalid_argument("{}: no \"text_config\" object: expected the nested DeepSeek-V4.1 HF config (spec "
                                "§2.1)", source);
    std::vector<std::string> architectures;
    FieldReader top(root, source);
    top.get("architectures", &architectures);
    top.get("bos_token_id", &c.bos_token_id);
    top.get("eos_token_id", &c.eos_token_id);
    top.get("pad_token_id", &c.pad_token_id);
    top.get("image_token_id", &c.image_token_id);
    DI_RETURN_IF_ERROR(top.status());
    if (!architectures.empty()) {
        c.architecture = architectures[0];
        if (c.architecture != "DeepseekV41ForCausalLM")
            return invalid_argument("{}: architectures[0] is \"{}\", expected \"DeepseekV41ForCausalLM\"", source,
                                    c.architecture);
    }
    auto quant = root.find("quantization_config");
    if (quant == root.end())
        return invalid_argument("{}: no top-level \"quantization_config\" (fp8 32x32 weights, fp4 experts; spec §2.1)",
                                source);
    FieldReader qr(*quant, source + ".quantization_config");
    qr.get("quant_method", &c.quantization.quant_method, true);
    qr.get("activation_scheme", &c.quantization.activation_scheme);
    qr.get("weight_block_size", &c.quantization.weight_block_size, true);
    qr.get("scale_fmt", &c.quantization.scale_fmt, true);
    qr.get("expert_dtype", &c.quantization.expert_dtype);
    DI_RETURN_IF_ERROR(qr.status());
    DI_RETURN_IF_ERROR(read_text_config(*text, source + ".text_config", &c));
    DI_RETURN_IF_ERROR(c.finalize().with_context(source));
    return c;
}

Expected<ModelConfig> load_model_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) return error(StatusCode::kNotFound, "{}: cannot open the model config", path);
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_model_config(ss.str(), path);
}

Status apply_config_overrides(ModelConfig* config, const std::string& overrides_json, const std::string& source) {
    json overrides;
    try {
        overrides = json::parse(overrides_json);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double
        return invalid_argument("{}: not valid JSON: {}", source, e.what());
    }
    if (!overrides.is_object()) return invalid_argument("{}: expected a JSON object of config fields", source);
    json current = json::parse(model_config_to_json(*config));
    json text_overrides = overrides.contains("text_config") ? overrides["text_config"] : overrides;
    for (auto& [key, value] : text_overrides.items()) {
        if (key == "text_config") continue;
        if (!current["text_config"].contains(key) && key != "gate_temp")
            return invalid_argument("{}: unknown text_config field \"{}\"", source, key);
        current["text_config"][key] = value;
    }
    for (const char* key : {"quantization_config", "bos_token_id", "eos_token_id", "pad_token_id", "image_token_id"})
        if (overrides.contains(key)) current[key] = overrides[key];
    DI_ASSIGN_OR_RETURN(*config, parse_model_config(current.dump(), source));
    return Status::ok();
}

std::string model_config_to_json(const ModelConfig& c) {
    json text;
    text["model_type"] = "deepseek_v41_text";
    text["vocab_size"] = c.vocab_size;
    text["hidden_size"] = c.hidden_size;
    text["num_hidden_layers"] = c.num_hidden_layers;
    text["num_attention_heads"] = c.num_attention_heads;
    text["num_key_value_heads"] = c.num_key_value_heads;
    text["head_dim"] = c.head_dim;
    text["qk_rope_head_dim"] = c.qk_rope_head_dim;
    text["q_lora_rank"] = c.q_lora_rank;
    text["o_lora_rank"] = c.o_lora_rank;
    text["o_groups"] = c.o_groups;
    text["moe_intermediate_size"] = c.moe_intermediate_size;
    text["n_routed_experts"] = c.n_routed_experts;
    text["n_shared_experts"] = c.n_shared_experts;
    text["num_experts_per_tok"] = c.num_experts_per_tok;
    text["scoring_func"] = c.scoring_func == ScoringFunc::kSqrtSoftplus ? "sqrtsoftplus"
                           : c.scoring_func == ScoringFunc::kSoftmax  ? "softmax"
                                                                      : "sigmoid";
    text["topk_method"] = c.topk_method;
    text["norm_topk_prob"] = c.norm_topk_prob;
    text["routed_scaling_factor"] = c.routed_scaling_factor;
    text["hidden_act"] = c.hidden_act;
    text["swiglu_limit"] = c.swiglu_limit;
    text["rms_norm_eps"] = c.rms_norm_eps;
    if (c.gate_temp != 1.0) text["gate_temp"] = c.gate_temp;
    text["attention_bias"] = false;
    text["tie_word_embeddings"] = false;
    text["max_position_embeddings"] = c.max_position_embeddings;
    text["rope_theta"] = c.rope_theta;
    if (c.rope_scaling.original_max_position_embeddings > 0)
        text["rope_scaling"] = {{"rope_type", c.rope_scaling.type},
                                {"factor", c.rope_scaling.factor},
                                {"beta_fast", c.rope_scaling.beta_fast},
                                {"beta_slow", c.rope_scaling.beta_slow},
                                {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
    text["sliding_window"] = c.sliding_window;
    text["compress_ratios"] = c.compress_ratios;
    text["compress_rope_theta"] = c.compress_rope_theta;
    text["kv_source_layer_ids"] = c.kv_source_layer_ids;
    text["index_source_layer_ids"] = c.index_source_layer_ids;
    text["index_n_heads"] = c.index_n_heads;
    text["index_head_dim"] = c.index_head_dim;
    text["index_topk"] = c.index_topk;
    text["candidate_source_layer_id"] = c.candidate_source_layer_id;
    text["candidate_topk_blocks"] = c.candidate_topk_blocks;
    text["candidate_block_size"] = c.candidate_block_size;
    text["hc_mult"] = c.hc_mult;
    text["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
    text["hc_eps"] = c.hc_eps;
    text["engram_layer_ids"] = c.engram_layer_ids;
    text["engram_num_embeddings"] = c.engram_num_embeddings;
    text["engram_max_ngram_size"] = c.engram_max_ngram_size;
    text["engram_vocab_size"] = c.engram_vocab_size;
    text["engram_n_heads"] = c.engram_n_heads;
    text["engram_head_dim"] = c.engram_head_dim;
    text["engram_pad_token_id"] = c.engram_pad_token_id;
    text["engram_compressed_vocab_size"] = c.engram_compressed_vocab_size;
    text["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
    text["dspark_block_size"] = c.dspark_block_size;
    text["dspark_noise_token_id"] = c.dspark_noise_token_id;
    text["dspark_target_layer_ids"] = c.dspark_target_layer_ids;
    text["dspark_markov_rank"] = c.dspark_markov_rank;
    text["dspark_n_routed_experts"] = c.dspark_n_routed_experts;
    text["dspark_num_experts_per_tok"] = c.dspark_num_experts_per_tok;
    text["dtype"] = "bfloat16";
    json root;
    root["architectures"] = {c.architecture};
    root["model_type"] = "deepseek_v41";
    root["dtype"] = "bfloat16";
    root["bos_token_id"] = c.bos_token_id;
    root["eos_token_id"] = c.eos_token_id;
    root["pad_token_id"] = c.pad_token_id;
    root["image_token_id"] = c.image_token_id;
    root["quantization_config"] = {{"quant_method", c.quantization.quant_method},
                                   {"activation_scheme", c.quantization.activation_scheme},
                                   {"weight_block_size", c.quantization.weight_block_size},
                                   {"scale_fmt", c.quantization.scale_fmt},
                                   {"expert_dtype", c.quantization.expert_dtype}};
    root["text_config"] = text;
    return root.dump(2);
}

}  // namespace deepinfer::model
