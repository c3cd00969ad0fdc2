// Model::load: config, census-checked shards and the Engram token map from a checkpoint directory.
#include <chrono>

#include "core/log.h"
#include "model/model.h"
#include "tokenizer/engram_token_map.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::model {

Expected<std::unique_ptr<Model>> Model::load(const std::string& dir, bool progress, const ParallelPlan& plan) {
    const auto t0 = std::chrono::steady_clock::now();
    DI_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(dir + "/config.json"));
    if (progress) log::info("loading {}: mapping safetensors shards", dir);
    DI_ASSIGN_OR_RETURN(loader::TensorStore store, loader::TensorStore::open_dir(dir));
    size_t bytes = 0;
    for (const auto& f : store.files()) bytes += f->file_size();
    if (progress) log::info("loading {}: {} tensors in {} shard(s), {:.2f} GB mapped; checking the census",
                            dir, store.entries().size(), store.files().size(), bytes / 1e9);
    std::vector<int32_t> token_map;
    if (!config.engram_layer_ids.empty()) {
        DI_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load_file(dir + "/tokenizer.json"));
        int32_t n_classes = 0;
        DI_ASSIGN_OR_RETURN(token_map, tokenizer::build_engram_token_map(tok, config.vocab_size, &n_classes));
    }
    auto model = create(std::move(config), std::make_unique<loader::TensorStore>(std::move(store)), std::move(token_map), plan);
    if (model && progress)
        log::info("loading {}: ready in {:.2f} s", dir, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return model;
}

}  // namespace deepinfer::model
