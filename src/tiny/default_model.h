// The built-in default model: when no --model is given anywhere, a tiny checkpoint (preset "default",
// seed 0, synthetic tokenizer) generated on first use into the cache directory. Needs nothing outside
// the repository.
#pragma once

#include <string>

#include "core/status.h"

namespace deepinfer::tiny {

// `dir` if given (must hold a config.json), else the built-in checkpoint (generated if missing).
Expected<std::string> resolve_model_dir(const std::string& dir);
// Where the built-in checkpoint lives: <cache dir>/tiny-default-v1.
std::string builtin_model_dir();

}  // namespace deepinfer::tiny
