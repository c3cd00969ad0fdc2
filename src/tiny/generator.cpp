// make-tiny: tensors of the config's table generated in parallel, written as safetensors shards with an
// index, plus config.json and the tokenizer files.
#include "tiny/generator.h"

#include <filesystem>
#include <fstream>
#include <atomic>
#include <map>

#include "core/log.h"
#include "core/thread_pool.h"
#include "loader/safetensors.h"
#include "model/tensor_table.h"
#include "tiny/weight_init.h"

namespace deepinfer::tiny {
namespace fs = std::filesystem;

Status adopt_tokenizer(model::ModelConfig* c, const TokenizerAssets& t) {
    if (t.vocab_size <= 0) return invalid_argument("tokenizer: empty vocabulary");
    c->vocab_size = t.vocab_size;
    c->bos_token_id = t.bos_id;
    c->eos_token_id = t.eos_id;
    c->pad_token_id = t.pad_id;
    c->engram_pad_token_id = t.pad_id;
    c->dspark_noise_token_id = t.noise_token_id;
    c->engram_compressed_vocab_size = t.n_engram_classes;
    // The image token must lie inside the vocabulary; small vocabularies have no image placeholder.
    if (c->image_token_id >= c->vocab_size) c->image_token_id = c->vocab_size - 1;
    return c->finalize().with_context("config after adopting the tokenizer");
}

namespace {

Status write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path);
    if (!out) return error(StatusCode::kIoError, "{}: cannot open for writing", path.string());
    out << text;
    return out ? Status::ok() : error(StatusCode::kIoError, "{}: write failed", path.string());
}

}  // namespace

Status make_tiny_checkpoint(const TinyOptions& opt) {
    const model::ModelConfig& c = opt.config;
    std::error_code ec;
    fs::create_directories(opt.out_dir, ec);
    if (ec) return error(StatusCode::kIoError, "{}: cannot create directory: {}", opt.out_dir, ec.message());
    const fs::path dir(opt.out_dir);

    // Weights paired with their scale grids, generated on all threads.
    std::vector<model::TensorSpec> specs = model::expected_tensors(c);
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < specs.size(); ++i) index_of[specs[i].name] = i;
    std::vector<std::vector<uint8_t>> data(specs.size());
    std::vector<size_t> primaries;
    for (size_t i = 0; i < specs.size(); ++i) {
        auto k = specs[i].kind;
        if (k != model::TensorKind::kFp8Scale && k != model::TensorKind::kFp4Scale && k != model::TensorKind::kEngramScale)
            primaries.push_back(i);
    }
    int64_t total = 0;
    for (const auto& s : specs) total += s.bytes();
    if (opt.progress) log::info("make-tiny: generating {} tensors ({:.1f} MB)", specs.size(), total / 1e6);
    std::atomic<size_t> done{0};
    ThreadPool::global().parallel_for(primaries.size(), [&](size_t b, size_t e, int thread) {
        for (size_t p = b; p < e; ++p) {
            const size_t i = primaries[p];
            const model::TensorSpec& spec = specs[i];
            std::vector<uint8_t>* scale_out = nullptr;
            if (spec.kind != model::TensorKind::kPlain) {
                std::string scale_name = spec.name.substr(0, spec.name.size() - std::string("weight").size()) + "scale";
                scale_out = &data[index_of.at(scale_name)];
            }
            generate_tensor(c, spec, opt.seed, &data[i], scale_out);
            size_t d = ++done;
            if (opt.progress && thread == 0 && total > (int64_t{256} << 20) && d % (primaries.size() / 10) == 0)
                log::info("make-tiny: {}/{} tensors", d, primaries.size());
        }
    });

    // Shards in table order, each at most shard_bytes (a single tensor may exceed it).
    std::vector<loader::SafetensorsWriter> shards(1);
    std::vector<std::pair<std::string, size_t>> placement;  // tensor -> shard
    for (size_t i = 0; i < specs.size(); ++i) {
        if (shards.back().total_bytes() > 0 &&
            static_cast<int64_t>(shards.back().total_bytes() + data[i].size()) > opt.shard_bytes)
            shards.emplace_back();
        placement.emplace_back(specs[i].name, shards.size() - 1);
        shards.back().add(specs[i].name, specs[i].dtype, specs[i].shape, std::move(data[i]));
    }
    std::vector<std::pair<std::string, std::string>> weight_map;
    const size_t n_shards = shards.size();
    for (size_t s = 0; s < n_shards; ++s) {
        std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n_shards);
        shards[s].set_metadata("format", "pt");
        DI_RETURN_IF_ERROR(shards[s].write((dir / name).string()));
        for (const auto& [tensor, shard] : placement)
            if (shard == s) weight_map.emplace_back(tensor, name);
    }
    DI_RETURN_IF_ERROR(loader::write_safetensors_index((dir / "model.safetensors.index.json").string(), weight_map,
                                                       static_cast<size_t>(total)));
    fs::remove(dir / "model.safetensors", ec);
    DI_RETURN_IF_ERROR(write_text(dir / "config.json", model::model_config_to_json(c) + "\n"));
    DI_RETURN_IF_ERROR(write_text(dir / "tokenizer.json", opt.tokenizer.tokenizer_json));
    DI_RETURN_IF_ERROR(write_text(dir / "tokenizer_config.json", opt.tokenizer.tokenizer_config_json));
    DI_RETURN_IF_ERROR(write_text(dir / "generation_config.json",
                                  fmt::format("{{\n  \"bos_token_id\": {},\n  \"eos_token_id\": {},\n  \"do_sample\": "
                                              "true,\n  \"temperature\": 1.0,\n  \"top_p\": 0.95\n}}\n",
                                              c.bos_token_id, c.eos_token_id)));
    if (opt.progress)
        log::info("make-tiny: wrote {} ({} shard{}, {:.1f} MB, seed {})", opt.out_dir, n_shards, n_shards > 1 ? "s" : "",
                  total / 1e6, opt.seed);
    return Status::ok();
}

}  // namespace deepinfer::tiny
