// Tiny-checkpoint helpers for tests.
#include "support/tiny_model.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "core/check.h"
#include "loader/safetensors.h"
#include "support/test_support.h"
#include "tiny/presets.h"
#include "tiny/tokenizer_assets.h"

namespace deepinfer::testing {

std::string tiny_checkpoint(const std::string& preset, uint64_t seed, const std::string& overrides_json) {
    static std::mutex mutex;
    static std::map<std::string, std::string> cache;
    std::lock_guard<std::mutex> lock(mutex);
    std::string key = preset + "/" + std::to_string(seed) + "/" + overrides_json;
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    auto config = tiny::tiny_preset(preset);
    DI_CHECK_MSG(config.has_value(), "{}", config.status().to_string());
    tiny::TinyOptions opt;
    opt.config = *config;
    if (!overrides_json.empty()) {
        Status s = model::apply_config_overrides(&opt.config, overrides_json, "test overrides");
        DI_CHECK_MSG(s.is_ok(), "{}", s.to_string());
    }
    auto assets = tiny::synthetic_tokenizer_assets(opt.config.vocab_size);
    DI_CHECK_MSG(assets.has_value(), "{}", assets.status().to_string());
    opt.tokenizer = std::move(*assets);
    Status s = tiny::adopt_tokenizer(&opt.config, opt.tokenizer);
    DI_CHECK_MSG(s.is_ok(), "{}", s.to_string());
    opt.seed = seed;
    opt.progress = false;
    opt.out_dir = make_temp_dir("tiny-" + preset).string();
    s = tiny::make_tiny_checkpoint(opt);
    DI_CHECK_MSG(s.is_ok(), "{}", s.to_string());
    cache[key] = opt.out_dir;
    return opt.out_dir;
}

std::unique_ptr<model::Model> load_tiny_model(const std::string& dir) {
    auto model = model::Model::load(dir, false);
    DI_CHECK_MSG(model.has_value(), "{}", model.status().to_string());
    return std::move(*model);
}

SingleSequence::SingleSequence(model::Model& model, int32_t n_blocks) : model_(model) {
    pools_ = std::make_unique<kv::KvPools>(model.cache_layout(), n_blocks, n_blocks);
    cache_ = std::make_unique<kv::SequenceCache>(pools_->layout);
}

std::vector<float> SingleSequence::feed(const std::vector<int32_t>& tokens, bool all_rows) {
    model::ForwardBatch batch;
    batch.tokens = tokens;
    model::SeqChunk chunk;
    chunk.cache = cache_.get();
    chunk.start_pos = cache_->length();
    chunk.n_rows = static_cast<int32_t>(tokens.size());
    chunk.history.assign(history_.end() - std::min<size_t>(history_.size(), 3), history_.end());
    batch.seqs.push_back(chunk);
    if (all_rows)
        for (int32_t r = 0; r < chunk.n_rows; ++r) batch.logit_rows.push_back(r);
    else
        batch.logit_rows.push_back(chunk.n_rows - 1);
    DI_CHECK(cache_->ensure_blocks(*pools_, chunk.start_pos + chunk.n_rows));
    model::ForwardOutput out;
    Status s = model_.forward(*pools_, batch, &out);
    DI_CHECK_MSG(s.is_ok(), "{}", s.to_string());
    history_.insert(history_.end(), tokens.begin(), tokens.end());
    return out.logits;
}

}  // namespace deepinfer::testing
