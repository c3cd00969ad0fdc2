// Bytes a decode step must read, per block (the memory-bandwidth roofline of bench-decode): every weight
// the block uses once per step (routed experts only for the experts the batch selects), the Engram rows it
// gathers, and the cache records its attention and indexer read at a given context length.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace deepinfer::model {

struct BlockTraffic {
    double weight_bytes = 0;  // dense weights + the expected distinct routed experts of the batch
    double cache_bytes = 0;   // window / compressed / index-key records read
    double total() const { return weight_bytes + cache_bytes; }
};

// One decode step of `batch` sequences at `context` positions, on one rank of a tp x ep split.
BlockTraffic decode_traffic(const ModelConfig& config, int block, int64_t context, int batch, int tp = 1, int ep = 1);
// The final norm and LM head (fp32 math on the bf16-stored head), on one rank of a vocab-parallel TP split.
double head_traffic(const ModelConfig& config, int tp = 1);

}  // namespace deepinfer::model
