// Test helpers around tiny checkpoints: generate one (cached per preset and seed within a test binary),
// load it, and run single-sequence forwards with a private KV pool.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kv/sequence_cache.h"
#include "model/model.h"
#include "tiny/generator.h"

namespace deepinfer::testing {

// Path of a generated checkpoint for the preset, with the synthetic tokenizer (generated once per process
// into a temp dir).
std::string tiny_checkpoint(const std::string& preset, uint64_t seed = 0, const std::string& overrides_json = "");

std::unique_ptr<model::Model> load_tiny_model(const std::string& dir);

// One sequence with its own pools; feeds chunks and collects last-row logits.
class SingleSequence {
   public:
    explicit SingleSequence(model::Model& model, int32_t n_blocks = 512);
    // Run tokens as one chunk; returns the logits of every row when all_rows, else of the last row.
    std::vector<float> feed(const std::vector<int32_t>& tokens, bool all_rows = false);
    int64_t length() const { return cache_->length(); }
    model::Model& model() { return model_; }
    kv::KvPools& pools() { return *pools_; }
    kv::SequenceCache& cache() { return *cache_; }
    const std::vector<int32_t>& history() const { return history_; }

   private:
    model::Model& model_;
    std::unique_ptr<kv::KvPools> pools_;
    std::unique_ptr<kv::SequenceCache> cache_;
    std::vector<int32_t> history_;
};

}  // namespace deepinfer::testing
