// Built-in tiny checkpoint, generated once into the cache directory (atomically: a half-written
// directory is never visible to a concurrent reader).
#include "tiny/default_model.h"

#include <unistd.h>

#include <filesystem>

#include "core/env.h"
#include "core/log.h"
#include "tiny/presets.h"
#include "tiny/tokenizer_assets.h"

namespace deepinfer::tiny {
namespace fs = std::filesystem;

std::string builtin_model_dir() { return env::cache_dir() + "/tiny-default-v1"; }

Expected<std::string> resolve_model_dir(const std::string& dir) {
    std::error_code ec;
    if (!dir.empty()) {
        if (!fs::is_directory(dir, ec)) return error(StatusCode::kNotFound, "--model {}: no such directory", dir);
        if (!fs::exists(fs::path(dir) / "config.json", ec))
            return error(StatusCode::kNotFound, "--model {}: no config.json in that directory", dir);
        return dir;
    }
    const std::string target = builtin_model_dir();
    if (fs::exists(fs::path(target) / "model.safetensors.index.json", ec)) return target;
    log::info("generating the built-in tiny checkpoint into {}", target);
    DI_ASSIGN_OR_RETURN(model::ModelConfig config, tiny_preset("default"));
    DI_ASSIGN_OR_RETURN(TokenizerAssets assets, synthetic_tokenizer_assets(1024));
    DI_RETURN_IF_ERROR(adopt_tokenizer(&config, assets));
    TinyOptions opt;
    opt.config = config;
    opt.tokenizer = std::move(assets);
    opt.seed = 0;
    opt.out_dir = target + ".tmp-" + std::to_string(getpid());
    fs::remove_all(opt.out_dir, ec);
    DI_RETURN_IF_ERROR(make_tiny_checkpoint(opt));
    fs::rename(opt.out_dir, target, ec);
    if (ec) {
        fs::remove_all(opt.out_dir, ec);  // another process won the race; use its copy
        if (!fs::exists(fs::path(target) / "model.safetensors.index.json"))
            return error(StatusCode::kIoError, "{}: could not install the built-in checkpoint", target);
    }
    return target;
}

}  // namespace deepinfer::tiny
