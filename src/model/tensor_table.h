// The checkpoint contract: every tensor a config implies, with its storage dtype and shape (spec §3.3).
// The census check (loader) and the tiny-checkpoint generator both derive from this one table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace deepinfer::model {

enum class TensorKind {
    kPlain,        // BF16 / F32 tensor used as is
    kFp8Weight,    // F8_E4M3 [out, in], paired with a 32x32 F8_E8M0 scale grid
    kFp8Scale,     // F8_E8M0 [ceil(out/32), ceil(in/32)]
    kFp4Weight,    // I8 [out, in/2], two e2m1 codes per byte (MXFP4)
    kFp4Scale,     // F8_E8M0 [out, in/32]
    kEngramTable,  // F8_E4M3 [rows, head_dim]
    kEngramScale,  // F8_E8M0 [rows, head_dim/32]
};

struct TensorSpec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string role;  // e.g. "attn.wq_a", "ffn.experts.w1", for the census
    TensorKind kind = TensorKind::kPlain;
    int block = -1;    // block index (backbone layer or DSpark stage), -1 for globals
    int64_t bytes() const;
};

std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

// Tensors of the release that the text model does not use (vision tower, aligner, image embeddings).
bool is_vision_tensor(const std::string& name);

}  // namespace deepinfer::model
