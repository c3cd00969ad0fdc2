// The tensor table of spec §3.3, generated from the config.
#include "model/tensor_table.h"

#include <fmt/format.h>

namespace deepinfer::model {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class TableBuilder {
   public:
    explicit TableBuilder(std::vector<TensorSpec>* out) : out_(out) {}
    void plain(const std::string& name, DType dtype, std::vector<int64_t> shape, const std::string& role, int block) {
        out_->push_back({name, dtype, std::move(shape), role, TensorKind::kPlain, block});
    }
    void fp8_linear(const std::string& prefix, int64_t out, int64_t in, const std::string& role, int block) {
        out_->push_back({prefix + ".weight", DType::kF8E4M3, {out, in}, role, TensorKind::kFp8Weight, block});
        out_->push_back({prefix + ".scale", DType::kF8E8M0, {ceil_div(out, 32), ceil_div(in, 32)}, role + ".scale",
                         TensorKind::kFp8Scale, block});
    }
    void fp4_linear(const std::string& prefix, int64_t out, int64_t in, const std::string& role, int block) {
        out_->push_back({prefix + ".weight", DType::kI8, {out, in / 2}, role, TensorKind::kFp4Weight, block});
        out_->push_back({prefix + ".scale", DType::kF8E8M0, {out, in / 32}, role + ".scale", TensorKind::kFp4Scale,
                         block});
    }

   private:
    std::vector<TensorSpec>* out_;
};

}  // namespace

int64_t TensorSpec::bytes() const {
    int64_t n = static_cast<int64_t>(dtype_size(dtype));
    for (auto d : shape) n *= d;
    return n;
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
    std::vector<TensorSpec> specs;
    TableBuilder t(&specs);
    const int64_t D = c.hidden_size, V = c.vocab_size, H = c.num_attention_heads, hd = c.head_dim;
    t.plain("embed.weight", DType::kBF16, {V, D}, "embed", -1);
    t.plain("head.weight", DType::kBF16, {V, D}, "head", -1);
    t.plain("norm.weight", DType::kBF16, {D}, "norm", -1);
    for (int b = 0; b < c.n_blocks(); ++b) {
        const LayerRole& role = c.roles[b];
        const std::string P = c.block_prefix(b);
        t.plain(P + ".attn_norm.weight", DType::kBF16, {D}, "attn_norm", b);
        t.plain(P + ".ffn_norm.weight", DType::kBF16, {D}, "ffn_norm", b);
        for (const char* sub : {"attn", "ffn"}) {
            t.plain(fmt::format("{}.hc_{}_fn", P, sub), DType::kF32, {c.hc_mix_dim(), c.hc_dim()}, "hc.fn", b);
            t.plain(fmt::format("{}.hc_{}_base", P, sub), DType::kF32, {c.hc_mix_dim()}, "hc.base", b);
            t.plain(fmt::format("{}.hc_{}_scale", P, sub), DType::kF32, {3}, "hc.scale", b);
        }
        t.plain(P + ".attn.attn_sink", DType::kF32, {H}, "attn.attn_sink", b);
        t.plain(P + ".attn.q_norm.weight", DType::kBF16, {c.q_lora_rank}, "attn.q_norm", b);
        t.plain(P + ".attn.kv_norm.weight", DType::kBF16, {hd}, "attn.kv_norm", b);
        t.fp8_linear(P + ".attn.wq_a", c.q_lora_rank, D, "attn.wq_a", b);
        t.fp8_linear(P + ".attn.wq_b", H * hd, c.q_lora_rank, "attn.wq_b", b);
        t.fp8_linear(P + ".attn.wkv", hd, D, "attn.wkv", b);
        t.fp8_linear(P + ".attn.wo_a", int64_t{c.o_groups} * c.o_lora_rank, H * hd / c.o_groups, "attn.wo_a", b);
        t.fp8_linear(P + ".attn.wo_b", D, int64_t{c.o_groups} * c.o_lora_rank, "attn.wo_b", b);
        if (role.kv_source) {
            t.plain(P + ".attn.compressor.wkv.weight", DType::kBF16, {hd, D}, "attn.compressor.wkv", b);
            if (role.compress_ratio > 1)
                t.plain(P + ".attn.compressor.wgate.weight", DType::kBF16, {hd, D}, "attn.compressor.wgate", b);
            t.plain(P + ".attn.compressor.norm.weight", DType::kBF16, {hd}, "attn.compressor.norm", b);
            t.plain(P + ".attn.indexer.wk.weight", DType::kBF16, {c.index_head_dim, hd}, "attn.indexer.wk", b);
            t.plain(P + ".attn.indexer.k_norm.weight", DType::kBF16, {c.index_head_dim}, "attn.indexer.k_norm", b);
        }
        if (role.index_source) {
            t.fp8_linear(P + ".attn.indexer.wq_b", int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank,
                         "attn.indexer.wq_b", b);
            t.plain(P + ".attn.indexer.weights_proj.weight", DType::kBF16, {c.index_n_heads, D},
                    "attn.indexer.weights_proj", b);
        }
        const int64_t E = role.n_routed_experts, I = c.moe_intermediate_size;
        t.plain(P + ".ffn.gate.weight", DType::kBF16, {E, D}, "ffn.gate", b);
        t.plain(P + ".ffn.gate.bias", DType::kF32, {E}, "ffn.gate.bias", b);
        t.plain(P + ".ffn.gate.bias_vl", DType::kF32, {E}, "ffn.gate.bias_vl", b);
        for (int64_t e = 0; e < E; ++e) {
            std::string X = fmt::format("{}.ffn.experts.{}", P, e);
            t.fp4_linear(X + ".w1", I, D, "ffn.experts.w1", b);
            t.fp4_linear(X + ".w2", D, I, "ffn.experts.w2", b);
            t.fp4_linear(X + ".w3", I, D, "ffn.experts.w3", b);
        }
        t.fp8_linear(P + ".ffn.shared_experts.w1", I, D, "ffn.shared_experts.w1", b);
        t.fp8_linear(P + ".ffn.shared_experts.w2", D, I, "ffn.shared_experts.w2", b);
        t.fp8_linear(P + ".ffn.shared_experts.w3", I, D, "ffn.shared_experts.w3", b);
        if (role.engram) {
            const int64_t rows = c.engram_num_embeddings[role.engram_index], ehd = c.engram_head_dim;
            specs.push_back({P + ".engram.embed.weight", DType::kF8E4M3, {rows, ehd}, "engram.embed",
                             TensorKind::kEngramTable, b});
            specs.push_back({P + ".engram.embed.scale", DType::kF8E8M0, {rows, ehd / 32}, "engram.embed.scale",
                             TensorKind::kEngramScale, b});
            t.fp8_linear(P + ".engram.wkv", D * (c.hc_mult + 1), int64_t{c.engram_hash_cols()} * ehd, "engram.wkv", b);
            t.plain(P + ".engram.q_weight", DType::kBF16, {c.hc_mult, D}, "engram.q_weight", b);
            t.plain(P + ".engram.k_weight", DType::kBF16, {c.hc_mult, D}, "engram.k_weight", b);
        }
        if (role.is_dspark && b == c.num_hidden_layers) {
            t.fp8_linear(P + ".main_proj", D, D * static_cast<int64_t>(c.dspark_target_layer_ids.size()),
                         "dspark.main_proj", b);
            t.plain(P + ".main_norm.weight", DType::kBF16, {D}, "dspark.main_norm", b);
        }
        if (role.is_dspark && b == c.n_blocks() - 1) {
            const int64_t R = c.dspark_markov_rank;
            t.plain(P + ".norm.weight", DType::kBF16, {D}, "dspark.norm", b);
            t.plain(P + ".markov_head.embed.weight", DType::kBF16, {V, R}, "dspark.markov_head.embed", b);
            t.plain(P + ".markov_head.head.weight", DType::kBF16, {V, R}, "dspark.markov_head.head", b);
            t.plain(P + ".confidence_head.proj.weight", DType::kBF16, {1, D + R}, "dspark.confidence_head", b);
        }
    }
    return specs;
}

bool is_vision_tensor(const std::string& name) {
    return name.rfind("vision.", 0) == 0 || name.rfind("aligner.", 0) == 0 || name == "image_start" ||
           name == "image_end" || name == "image_newline";
}

}  // namespace deepinfer::model
