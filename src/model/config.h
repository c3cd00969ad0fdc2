// ModelConfig: the released nested HF config.json (spec §2.1-§2.2) parsed and validated, plus the
// per-layer roles derived from it (spec §2.5). Every inconsistency is a load error naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::model {

enum class ScoringFunc { kSqrtSoftplus, kSoftmax, kSigmoid };

struct RopeScaling {
    std::string type = "yarn";
    double factor = 16.0;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
    int64_t original_max_position_embeddings = 65536;  // 0 disables YaRN
};

struct QuantizationConfig {
    std::string quant_method = "fp8";
    std::string activation_scheme = "dynamic";
    std::vector<int> weight_block_size = {32, 32};
    std::string scale_fmt = "ue8m0";
    std::string expert_dtype = "fp4";
};

// Role of one block (backbone layer or DSpark stage), spec §2.5.
struct LayerRole {
    int compress_ratio = 0;
    bool is_dspark = false;
    bool kv_source = false;         // owns a compressor and the compressed KV / index-key caches
    bool index_source = false;      // runs an indexer (query side); keys come from kv_source_layer
    bool candidate_source = false;  // publishes the candidate-block mask
    bool uses_candidates = false;   // index source after the candidate source: masks by its blocks
    bool engram = false;
    int engram_index = -1;          // position in engram_layer_ids
    int kv_source_layer = -1;       // whose compressed KV this layer reads (itself if kv_source)
    int index_source_layer = -1;    // whose top-k this layer uses (itself if index_source)
    int n_routed_experts = 0;
    int n_activated_experts = 0;
    bool yarn = false;              // ratio != 0: theta = compress_rope_theta with YaRN
};

struct ModelConfig {
    // Top level (spec §2.1).
    std::string architecture = "DeepseekV41ForCausalLM";
    int32_t bos_token_id = 0;
    int32_t eos_token_id = 1;
    int32_t pad_token_id = 2;
    int32_t image_token_id = 129264;
    QuantizationConfig quantization;

    // text_config (spec §2.2), HF names.
    int32_t vocab_size = 129280;
    int hidden_size = 5120;
    int num_hidden_layers = 40;
    int num_attention_heads = 64;
    int num_key_value_heads = 1;
    int head_dim = 512;
    int qk_rope_head_dim = 64;
    int q_lora_rank = 1280;
    int o_lora_rank = 1024;
    int o_groups = 8;
    int moe_intermediate_size = 2304;
    int n_routed_experts = 384;
    int n_shared_experts = 1;
    int num_experts_per_tok = 6;
    ScoringFunc scoring_func = ScoringFunc::kSqrtSoftplus;
    std::string topk_method = "noaux_tc";
    bool norm_topk_prob = true;
    double routed_scaling_factor = 1.5;
    std::string hidden_act = "silu";
    double swiglu_limit = 10.0;
    double rms_norm_eps = 1e-20;
    double gate_temp = 1.0;
    int64_t max_position_embeddings = 1048576;
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;
    int sliding_window = 128;
    std::vector<int> compress_ratios;
    double compress_rope_theta = 160000.0;
    std::vector<int> kv_source_layer_ids;
    std::vector<int> index_source_layer_ids;
    int index_n_heads = 32;
    int index_head_dim = 128;
    int index_topk = 512;
    int candidate_source_layer_id = -1;
    int candidate_topk_blocks = 0;
    int candidate_block_size = 0;
    int hc_mult = 4;
    int hc_sinkhorn_iters = 20;
    double hc_eps = 1e-6;
    std::vector<int> engram_layer_ids;
    std::vector<int64_t> engram_num_embeddings;
    int engram_max_ngram_size = 4;
    int64_t engram_vocab_size = 16000000;
    int engram_n_heads = 8;
    int engram_head_dim = 256;
    int32_t engram_pad_token_id = 2;
    int32_t engram_compressed_vocab_size = 99092;
    int num_nextn_predict_layers = 3;
    int dspark_block_size = 5;
    int32_t dspark_noise_token_id = 128799;
    std::vector<int> dspark_target_layer_ids;
    int dspark_markov_rank = 256;
    int dspark_n_routed_experts = 128;
    int dspark_num_experts_per_tok = 3;

    // Derived by finalize() (not in the JSON).
    std::vector<LayerRole> roles;  // one per block: backbone layers, then DSpark stages

    // The released configuration of spec §2.2 (for tests and `make-tiny --preset release`).
    static ModelConfig released();

    int n_blocks() const { return num_hidden_layers + num_nextn_predict_layers; }
    int nope_head_dim() const { return head_dim - qk_rope_head_dim; }
    int hc_dim() const { return hc_mult * hidden_size; }
    int hc_mix_dim() const { return (2 + hc_mult) * hc_mult; }
    int engram_hash_cols() const { return (engram_max_ngram_size - 1) * engram_n_heads; }
    bool has_dspark() const { return num_nextn_predict_layers > 0 && dspark_block_size > 0; }
    // Block name prefix in the checkpoint: "layers.{L}" or "mtp.{M}" (spec §3.3).
    std::string block_prefix(int block) const;

    // Validate every field and derive `roles`. Called by the parser; call again after editing fields.
    Status finalize();
};

// Parse the nested HF config.json (top-level quantization_config, text_config). `source` names the file
// in error messages.
Expected<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source);
Expected<ModelConfig> load_model_config(const std::string& path);
// Apply overrides (a JSON object of text_config fields, or {"text_config": {...}} and top-level fields).
Status apply_config_overrides(ModelConfig* config, const std::string& overrides_json, const std::string& source);
// Serialise in the released nested layout.
std::string model_config_to_json(const ModelConfig& config);

}  // namespace deepinfer::model
