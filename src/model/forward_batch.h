// What one forward pass runs: rows of several sequences, each a chunk of consecutive positions at any
// start position (spec §6.3), and which rows need logits. Plain data, filled by the runner.
#pragma once

#include <cstdint>
#include <vector>

#include "core/numeric.h"
#include "kv/sequence_cache.h"

namespace deepinfer::model {

struct SeqChunk {
    int64_t seq_id = 0;                  // stable id (followers of a multi-rank plan key their caches by it)
    kv::SequenceCache* cache = nullptr;  // records for [start_pos, start_pos + n_rows) are written here
    int64_t start_pos = 0;
    int32_t row_begin = 0;               // first row of this chunk in ForwardBatch::tokens
    int32_t n_rows = 0;
    // Token ids of the positions just before start_pos, oldest first (up to max_ngram_size - 1 of them),
    // for the Engram n-grams that reach back across the chunk boundary.
    std::vector<int32_t> history;
};

struct ForwardBatch {
    std::vector<int32_t> tokens;      // [n_rows]
    std::vector<SeqChunk> seqs;       // chunks in row order; rows of a chunk are contiguous
    std::vector<int32_t> logit_rows;  // rows whose logits are returned, in this order
    // Also return the DSpark input (the concatenated layer taps, spec §5.1 step 8) of the logit rows.
    bool want_main_hidden = false;
    // Write the DSpark window records (spec §7.2: main_kv of every backbone row) for all rows.
    bool dspark_rings = false;
};

struct ForwardOutput {
    std::vector<float> logits;       // fp32 [logit_rows, vocab]
    std::vector<bf16> main_hidden;   // bf16 [logit_rows, targets * hidden] when requested
};

// One DSpark drafting pass (spec §7.2) for a sequence whose backbone forward just ran at position pos.
struct DraftRequest {
    int64_t seq_id = 0;
    kv::SequenceCache* cache = nullptr;
    int64_t pos = 0;                  // position of the backbone row that produced main_hidden
    int32_t sampled_token = 0;        // the token the backbone sampled for position pos + 1
    const bf16* main_hidden = nullptr;  // [targets * hidden] of that row
    float temperature = 0.0f;         // 0 = greedy drafts
    uint64_t seed = 0;                // for temperature > 0
};

struct DraftOutput {
    std::vector<int32_t> tokens;      // [block_size + 1]: sampled token, then the drafts
    std::vector<float> logits;        // fp32 [block_size, vocab]: Markov-biased logits sampled from
    std::vector<float> confidence;    // [block_size] raw confidence logits
};

}  // namespace deepinfer::model
