// The DeepSeek-V4.1 text model on CPU (spec §5): forward(batch) over chunks of any length at any start
// position, reading and writing the packed paged caches, and the DSpark drafting pass (spec §7).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "kv/cache_layout.h"
#include "kv/sequence_cache.h"
#include "model/config.h"
#include "model/engram_hash.h"
#include "model/forward_batch.h"
#include "model/parallel.h"
#include "model/weights.h"
#include "ops/rope.h"

namespace deepinfer::model {

// Wall time spent per block when profiling is on (bench-decode): attention sublayer, MoE sublayer, and the
// rest of the block (mHC mixing, norms); plus embedding/Engram and the head.
struct ForwardProfile {
    // [n_blocks]; block_seconds includes the block's Engram lookup (engram_seconds), which runs before it
    std::vector<double> attention_seconds, moe_seconds, engram_seconds, block_seconds;
    double head_seconds = 0.0, other_seconds = 0.0;
    int64_t forwards = 0;
};

// The cache layout this config implies (spec §6.1), with blocks of block_tokens positions.
kv::CacheLayout make_cache_layout(const ModelConfig& config, int block_tokens = 64);

class Model {
   public:
    // Load config.json, the safetensors shards (census-checked, mmap'd) and tokenizer.json (for the
    // Engram token map) from a checkpoint directory. Prints progress.
    // Under TP/EP (plan), each rank keeps its shard of the weights; every rank of the groups must then run
    // the same forward calls in the same order (they exchange partial sums).
    static Expected<std::unique_ptr<Model>> load(const std::string& dir, bool progress = true,
                                                 const ParallelPlan& plan = {});
    // From parts (tests): engram_token_map maps every token id to its compressed class (spec §5.5.1).
    static Expected<std::unique_ptr<Model>> create(ModelConfig config, std::unique_ptr<loader::TensorStore> store,
                                                   std::vector<int32_t> engram_token_map,
                                                   const ParallelPlan& plan = {});

    const ModelConfig& config() const { return config_; }
    const kv::CacheLayout& cache_layout() const { return layout_; }
    const std::vector<int32_t>& engram_token_map() const { return token_map_; }
    const ParallelPlan& parallel_plan() const { return plan_; }
    // Per-block timing of forward() calls (off by default; costs two clock reads per sublayer).
    void set_profiling(bool on);
    const ForwardProfile& profile() const { return profile_; }

    // Run the backbone over the batch. Blocks for every written position must exist
    // (SequenceCache::ensure_blocks); each chunk's cache length becomes start_pos + n_rows.
    Status forward(kv::KvPools& pools, const ForwardBatch& batch, ForwardOutput* out);
    // One DSpark drafting pass (requires the DSpark rings to hold positions <= request.pos).
    Status draft(kv::KvPools& pools, const DraftRequest& request, DraftOutput* out);

   private:
    Model() = default;
    struct Forward;  // per-call state (model_forward.cpp)

    // Block pieces (model_block.cpp, model_attention.cpp, model_moe.cpp, model_engram.cpp).
    void hc_mixes(const bf16* stream, int64_t n, const F32Matrix& fn, const float* scale, const float* base,
                  float* pre, float* post, float* comb);
    void attention(Forward& f, int layer, const bf16* x, bf16* out);
    void compressed_topk(Forward& f, int layer, const bf16* x, const bf16* qr);
    void moe(int block, const bf16* x, int64_t n, bf16* out);
    void engram(Forward& f, int layer, bf16* stream);
    void block(Forward& f, int layer, bf16* stream, float* pre_in);
    // One mHC block over n rows with the given attention sublayer (backbone or DSpark variant).
    using AttentionFn = std::function<void(const bf16* x, bf16* out)>;
    void run_block(int block, bf16* stream, float* pre_in, int64_t n, const AttentionFn& attend);
    void dspark_attention(kv::KvPools& pools, const DraftRequest& request, int block, const bf16* x, bf16* out);
    void write_dspark_rings(kv::KvPools& pools, const ForwardBatch& batch, const bf16* main_hidden);
    const ops::Rope& rope_for(int block) const { return config_.roles[block].yarn ? rope_yarn_ : rope_plain_; }
    int local_heads() const { return config_.num_attention_heads / plan_.tp_size; }
    int local_groups() const { return config_.o_groups / plan_.tp_size; }
    // Sum a partial result over a group (TP attention output, EP expert sum); a failure is kept in
    // comm_status_ and reported by forward()/draft(): the group can no longer be used.
    void all_reduce(dist::Comm* comm, float* data, size_t count);
    // fp32 logits [n, vocab] = x [n, hidden] . head^T; under TP each rank computes its vocabulary rows and
    // the TP group all-gathers them (the same bits as one rank: each logit is one row's dot product).
    void lm_head(const float* x, int64_t n, float* logits);
    // Engram's kv projection x [n, cols*ehd] -> kv [n, D*(hc+1)] (bf16); split over TP like the head when the
    // weight was (engram_wkv_split): each output is the same row's dot product as on one rank.
    void engram_projection(const BlockWeights& w, const bf16* x, int64_t n, bf16* kv);
    // A linear whose output columns are split over the TP group (rank r holds head_rows(total, r, tp)):
    // compute_mine fills this rank's block [n, its columns]; out [n, total] is the gathered result.
    template <typename T>
    void tp_column_parallel(int64_t n, int64_t total, const std::function<void(T*)>& compute_mine, T* out,
                            const char* what);
    // Grouped low-rank output of the local heads (wo_a per group from its fp8 codes, then wo_b, summed over TP).
    void output_projection(const BlockWeights& w, const bf16* o, int64_t n, bf16* out);

    ModelConfig config_;
    kv::CacheLayout layout_;
    std::unique_ptr<ModelWeights> weights_;
    std::vector<int32_t> token_map_;
    int32_t engram_pad_cid_ = 0;
    EngramLayout engram_layout_;
    ops::Rope rope_plain_, rope_yarn_;
    ParallelPlan plan_;
    Status comm_status_;
    bool profiling_ = false;
    ForwardProfile profile_;
    double total_profiled_ = 0.0;
};

}  // namespace deepinfer::model
