// Deterministic synthetic weights: a counter-based generator keyed by (seed, tensor name) and the
// per-role statistics of spec Appendix B (RMSNorm means, fan-in gains, MXFP4 scale rule).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/tensor_table.h"

namespace deepinfer::tiny {

// Raw bytes of one tensor in its storage dtype. Scale tensors are produced together with their weight:
// generate the weight spec and pass the matching scale spec in `scale_out` (nullptr for plain tensors).
void generate_tensor(const model::ModelConfig& config, const model::TensorSpec& spec, uint64_t seed,
                     std::vector<uint8_t>* out, std::vector<uint8_t>* scale_out);

}  // namespace deepinfer::tiny
