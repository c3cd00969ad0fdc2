// Tiny presets (see presets.h). Engram table sizes follow from engram_vocab_size (sum of primes).
#include "tiny/presets.h"

#include "model/engram_hash.h"

namespace deepinfer::tiny {
namespace {

// Fill engram_num_embeddings from the hash layout so the config validates (spec §11 self-check).
void set_engram_rows(model::ModelConfig* c) {
    c->engram_num_embeddings.assign(c->engram_layer_ids.size(), 0);
    model::EngramLayout layout = model::make_engram_layout(*c);
    c->engram_num_embeddings = layout.table_rows;
}

model::ModelConfig base_small() {
    model::ModelConfig c;
    c.vocab_size = 1024;
    c.hidden_size = 256;
    c.num_attention_heads = 4;
    c.head_dim = 64;
    c.qk_rope_head_dim = 16;
    c.q_lora_rank = 64;
    c.o_lora_rank = 64;
    c.o_groups = 2;
    c.moe_intermediate_size = 128;
    c.n_routed_experts = 8;
    c.num_experts_per_tok = 2;
    c.sliding_window = 16;
    c.index_n_heads = 4;
    c.index_head_dim = 64;
    c.index_topk = 8;
    c.candidate_topk_blocks = 3;
    c.candidate_block_size = 4;
    c.engram_max_ngram_size = 4;
    c.engram_vocab_size = 100;
    c.engram_n_heads = 2;
    c.engram_head_dim = 32;
    c.dspark_block_size = 5;
    c.dspark_markov_rank = 32;
    c.dspark_n_routed_experts = 4;
    c.dspark_num_experts_per_tok = 2;
    c.max_position_embeddings = 65536;
    c.engram_compressed_vocab_size = 1;  // replaced from the tokenizer
    c.dspark_noise_token_id = 0;         // replaced from the tokenizer
    return c;
}

}  // namespace

std::vector<std::string> tiny_preset_names() { return {"default", "wide", "long", "release"}; }

Expected<model::ModelConfig> tiny_preset(const std::string& name) {
    model::ModelConfig c;
    if (name == "default") {
        c = base_small();
        c.num_hidden_layers = 8;
        c.compress_ratios = {0, 0, 2, 2, 1, 1, 1, 1, 0, 0, 0};
        c.kv_source_layer_ids = {2, 4};
        c.index_source_layer_ids = {2, 4, 6};
        c.candidate_source_layer_id = 4;
        c.engram_layer_ids = {1, 2};
        c.num_nextn_predict_layers = 3;
        c.dspark_target_layer_ids = {5, 6, 7};
    } else if (name == "wide") {
        c = base_small();
        c.hidden_size = 384;
        c.num_attention_heads = 6;
        c.head_dim = 96;
        c.qk_rope_head_dim = 32;
        c.q_lora_rank = 96;
        c.o_lora_rank = 96;
        c.o_groups = 3;
        c.moe_intermediate_size = 96;
        c.n_routed_experts = 16;
        c.num_experts_per_tok = 4;
        c.sliding_window = 24;
        c.index_n_heads = 6;
        c.index_head_dim = 32;
        c.index_topk = 12;
        c.candidate_topk_blocks = 4;
        c.candidate_block_size = 4;
        c.engram_n_heads = 3;
        c.engram_head_dim = 64;
        c.engram_vocab_size = 211;
        c.dspark_block_size = 4;
        c.dspark_markov_rank = 64;
        c.dspark_n_routed_experts = 6;
        c.dspark_num_experts_per_tok = 3;
        c.num_hidden_layers = 10;
        c.compress_ratios = {0, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0};
        c.kv_source_layer_ids = {1, 3, 5};
        c.index_source_layer_ids = {1, 3, 5, 7};
        c.candidate_source_layer_id = 5;
        c.engram_layer_ids = {0, 3};
        c.num_nextn_predict_layers = 2;
        c.dspark_target_layer_ids = {8, 9};
    } else if (name == "long") {
        c = base_small();
        c.sliding_window = 128;
        c.index_topk = 64;
        c.candidate_topk_blocks = 8;
        c.candidate_block_size = 16;
        c.num_hidden_layers = 6;
        c.compress_ratios = {0, 2, 2, 1, 1, 1, 0};
        c.kv_source_layer_ids = {1, 3};
        c.index_source_layer_ids = {1, 3, 5};
        c.candidate_source_layer_id = 3;
        c.engram_layer_ids = {0};
        c.num_nextn_predict_layers = 1;
        c.dspark_target_layer_ids = {3, 4, 5};
    } else if (name == "release") {
        c = model::ModelConfig::released();
        c.num_hidden_layers = 2;
        c.compress_ratios = {0, 2, 0, 0, 0};
        c.kv_source_layer_ids = {1};
        c.index_source_layer_ids = {1};
        c.candidate_source_layer_id = -1;
        c.engram_layer_ids = {0};
        c.engram_vocab_size = 1000;  // the released 384M-row tables would be 98 GB
        c.n_routed_experts = 16;
        c.dspark_n_routed_experts = 8;
        c.dspark_target_layer_ids = {0, 1};
    } else {
        return invalid_argument("unknown tiny preset \"{}\" (known: default, wide, long, release)", name);
    }
    set_engram_rows(&c);
    DI_RETURN_IF_ERROR(c.finalize().with_context("tiny preset " + name));
    return c;
}

}  // namespace deepinfer::tiny
