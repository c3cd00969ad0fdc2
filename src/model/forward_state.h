// Per-forward transient state shared by the pieces of Model (not part of the public API): row
// positions, per-sequence top-k lists and candidate masks published by source layers (spec §5.3.3's
// "shared runtime", per sequence), and the Engram row ids.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace deepinfer::model {

struct Model::Forward {
    kv::KvPools& pools;
    const ForwardBatch& batch;
    int64_t n = 0;                     // rows
    std::vector<int64_t> positions;    // [n] absolute position of each row
    struct Seq {
        std::vector<int32_t> topk;     // [n_rows, k] compressed entry numbers, -1 = none
        int k = 0;
        std::vector<uint8_t> candidates;  // [n_rows, width] candidate mask of the candidate source
        int64_t candidate_width = 0;
    };
    std::vector<Seq> seqs;
    std::vector<std::vector<int64_t>> engram_row_ids;  // [engram layer][n * cols]
    std::vector<bf16> taps;            // [n, targets * hidden] (DSpark input), filled at the target layers

    Forward(kv::KvPools& p, const ForwardBatch& b) : pools(p), batch(b) {}
};

}  // namespace deepinfer::model
