// A sequence as the scheduler sees it: its tokens (prompt then generated), how many positions have KV in
// the cache, and its block tables. Plain data; the engine owns request-level state (sampling, text).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/sequence_cache.h"

namespace deepinfer::sched {

enum class SeqState { kWaiting, kRunning, kFinished };

struct Sequence {
    Sequence(int64_t id_, std::vector<int32_t> prompt, const kv::CacheLayout& layout)
        : id(id_), tokens(std::move(prompt)), n_prompt(static_cast<int64_t>(tokens.size())), cache(layout) {}

    int64_t id;
    std::vector<int32_t> tokens;  // prompt followed by generated tokens
    int64_t n_prompt;
    kv::SequenceCache cache;      // cache.length() positions computed
    SeqState state = SeqState::kWaiting;
    int64_t arrival = 0;          // FCFS order (kept across preemptions)
    int64_t n_preemptions = 0;
    int64_t registered_blocks = 0;  // full blocks already offered to the prefix cache
    int64_t prefix_hit_tokens = 0;  // prompt positions served from the prefix cache at the last admission
    // Speculative decoding: the last verify_rows tokens are unverified drafts. They are scheduled together
    // with the token before them in one chunk, and dropped if the sequence is preempted.
    int32_t verify_rows = 0;

    int64_t computed() const { return cache.length(); }
    int64_t pending() const { return static_cast<int64_t>(tokens.size()) - computed(); }
};

}  // namespace deepinfer::sched
