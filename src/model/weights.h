// Model weights bound from a checkpoint: pointers into the mmap'd safetensors where the format is used
// as stored (fp8 / MXFP4 / bf16 / f32), plus the few load-time transforms of spec §3.4. Every tensor is checked by the census before binding.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/kernels.h"
#include "loader/safetensors.h"
#include "model/config.h"
#include "dist/host_shm.h"
#include "model/parallel.h"

namespace deepinfer::model {

using backend::Bf16Matrix;
using backend::F32Matrix;
using backend::Fp4Matrix;
using backend::Fp8Matrix;

struct ExpertWeights {
    Fp4Matrix w1, w2, w3;  // w1/w3 [inter, hidden], w2 [hidden, inter]
};

struct BlockWeights {
    const bf16* attn_norm = nullptr;   // [hidden]
    const bf16* ffn_norm = nullptr;    // [hidden]
    F32Matrix hc_attn_fn, hc_ffn_fn;   // [mix, hc*hidden]
    const float* hc_attn_base = nullptr;   // [mix]
    const float* hc_ffn_base = nullptr;
    const float* hc_attn_scale = nullptr;  // [3]
    const float* hc_ffn_scale = nullptr;
    // attention
    const float* attn_sink = nullptr;  // [local heads]
    const bf16* q_norm = nullptr;      // [q_lora]
    const bf16* kv_norm = nullptr;     // [head_dim]
    Fp8Matrix wq_a, wq_b, wkv, wo_b;
    // wo_a [groups*o_lora, heads*head_dim/groups] as stored, one view per local group g: rows [g*o_lora,
    // (g+1)*o_lora). Applied by ops::linear_fp8_bf16x_grouped: the spec's bf16 einsum on the dequantized weight
    // (spec §3.4 step 4, §5.3.7) from the fp8 codes, half the bytes of the bf16 copy.
    std::vector<Fp8Matrix> wo_a;
    // compressor + index keys (kv sources)
    Bf16Matrix compressor_wkv, compressor_wgate;  // [head_dim, hidden]; wgate only for ratio 2
    const bf16* compressor_norm = nullptr;        // [head_dim]
    Bf16Matrix indexer_wk;                        // [index_head_dim, head_dim]
    const bf16* indexer_k_norm = nullptr;         // [index_head_dim]
    // indexer queries (index sources)
    Fp8Matrix indexer_wq_b;                       // [index_heads*index_head_dim, q_lora]
    Bf16Matrix indexer_weights_proj;              // [index_heads, hidden]
    // MoE
    Bf16Matrix gate;                   // [experts, hidden]
    const float* gate_bias = nullptr;  // [experts]
    const float* gate_bias_vl = nullptr;
    std::vector<ExpertWeights> experts;  // [n_routed_experts]; only [expert_begin, expert_end) bound
    int expert_begin = 0, expert_end = 0;
    Fp8Matrix shared_w1, shared_w2, shared_w3;  // under a split (shard_shared_expert): this rank's rows / columns
    bool shared_split = false;
    // Engram
    const uint8_t* engram_table = nullptr;  // e4m3 [rows, engram_head_dim]
    const uint8_t* engram_scale = nullptr;  // e8m0 [rows, engram_head_dim/32]
    int64_t engram_rows = 0;
    Fp8Matrix engram_wkv;                   // [hidden*(hc+1), cols*engram_head_dim]; split: this rank's rows
    bool engram_wkv_split = false;          // TP: rows head_rows(hidden*(hc+1), tp_rank, tp_size)
    const bf16* engram_q_weight = nullptr;  // [hc, hidden]
    const bf16* engram_k_weight = nullptr;
    // DSpark
    Fp8Matrix main_proj;                    // stage 0: [hidden, hidden*targets]
    const bf16* main_norm = nullptr;
    const bf16* dspark_norm = nullptr;      // last stage
    Bf16Matrix markov_embed, markov_head;   // last stage: [vocab, rank]
    Bf16Matrix confidence_proj;             // last stage: [1, hidden+rank]
};

struct ModelWeights {
    const bf16* embed = nullptr;  // [vocab, hidden]
    Bf16Matrix head;              // [vocab, hidden]; under TP this rank's vocabulary rows only (vocab-parallel)
    int64_t head_row_begin = 0;   // first vocabulary id of this rank's head rows
    const bf16* norm = nullptr;   // [hidden]
    std::vector<BlockWeights> blocks;
    std::vector<std::vector<uint8_t>> owned_bytes;  // repacked shards (wo_b column slices under TP)
    std::unique_ptr<loader::TensorStore> store;
    std::vector<std::unique_ptr<dist::SharedRegion>> shared;  // Engram tables shared by the host's ranks
    WeightArena packed_arena;  // the storage of `packed`: every weight in huge pages (core/weight_arena.h)
    std::vector<std::unique_ptr<backend::PackedWeight>> packed;  // fp8 / MXFP4 weights in the kernels' layout
};

struct LoadProgress {
    bool print = true;
};

// Census-check `store` against `config` and bind every tensor, keeping this rank's shard under `plan`
// (local heads / groups of attention, local experts). Takes ownership of the store.
Expected<std::unique_ptr<ModelWeights>> bind_weights(const ModelConfig& config,
                                                     std::unique_ptr<loader::TensorStore> store,
                                                     const ParallelPlan& plan = {});

// Repack the quantized weights into the active kernel table's layout (called by bind_weights).
void prepare_for_kernels(ModelWeights& weights);

}  // namespace deepinfer::model
