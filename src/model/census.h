// Checkpoint census (spec §3.1, §11): every tensor the config implies is present with its storage dtype
// and shape (scale grids included), nothing unexpected is there, and a summary for `deepinfer inspect`.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "loader/safetensors.h"
#include "model/config.h"

namespace deepinfer::model {

struct CensusReport {
    std::map<std::string, int64_t> tensors_per_role;
    std::map<std::string, int64_t> bytes_per_dtype;
    int64_t n_tensors = 0;
    int64_t total_bytes = 0;
    int64_t n_vision_tensors = 0;  // present in the release, unused by the text model
};

// Check `store` against expected_tensors(config). The first problem is returned, naming the tensor.
Status check_checkpoint(const ModelConfig& config, const loader::TensorStore& store, CensusReport* report);

// Per-layer role table, one line per block (for `deepinfer inspect`).
std::string describe_layer_roles(const ModelConfig& config);

// Bytes of cache per token of context (compressed KV + index keys, spec §6.1) and the fixed per-sequence
// window-ring bytes, for the packed formats.
struct CacheFootprint {
    double compressed_bytes_per_token = 0;
    int64_t window_bytes_per_sequence = 0;
};
CacheFootprint cache_footprint(const ModelConfig& config);

}  // namespace deepinfer::model
