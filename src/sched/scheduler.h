// Continuous-batching scheduler (vLLM v1 style): each step spends a token budget on running sequences
// first (decode tokens or the next prefill chunk), then admits waiting sequences FCFS. KV blocks are
// taken from the pools as positions are scheduled; when they run out, prefix-cache entries are evicted,
// then the most recently arrived running sequence is preempted (its blocks freed, recomputed later).
// Output is plain data (SchedulerOutput); the scheduler never touches tensors.
//
// Call order per step: schedule() -> (runner runs the chunks, the cache lengths advance) ->
// on_chunks_done() -> the engine appends sampled tokens with append_token() and finishes sequences with
// finish(). Speculative steps append draft tokens before schedule() and roll back with truncate().
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "kv/prefix_cache.h"
#include "sched/sequence.h"

namespace deepinfer::sched {

struct SchedulerConfig {
    int32_t max_num_seqs = 64;             // running sequences at most
    int64_t max_num_batched_tokens = 2048; // tokens per step (prefill chunks + decodes)
    bool enable_prefix_caching = true;
    uint64_t prefix_salt = 0;              // separates caches of different models / settings
};

struct ScheduledChunk {
    int64_t seq_id = 0;
    int64_t start_pos = 0;
    int32_t n_tokens = 0;
    bool sample = false;  // the chunk reaches the last known token: the step yields a next token
};

struct SchedulerOutput {
    std::vector<ScheduledChunk> chunks;
    std::vector<int64_t> preempted;  // sequences moved back to waiting this step
    int64_t n_tokens = 0;
    bool empty() const { return chunks.empty(); }
};

struct SchedulerStats {
    int64_t waiting = 0, running = 0;
    int64_t preemptions = 0;
    int32_t window_blocks_used = 0, window_blocks_total = 0;
    int32_t compressed_blocks_used = 0, compressed_blocks_total = 0;
    int64_t prefix_queries = 0, prefix_hits = 0, prefix_query_tokens = 0, prefix_hit_tokens = 0;
};

class Scheduler {
   public:
    Scheduler(const SchedulerConfig& config, kv::KvPools& pools);
    ~Scheduler();

    // Takes ownership; the sequence waits until scheduled. Returns false if it can never fit in the pools.
    bool add(std::unique_ptr<Sequence> seq);
    SchedulerOutput schedule();
    // After the runner ran the chunks of `out`: offer newly full blocks to the prefix cache.
    void on_chunks_done(const SchedulerOutput& out);
    void append_token(int64_t seq_id, int32_t token);
    // Speculative rollback: drop tokens and cached positions past `length`.
    void truncate(int64_t seq_id, int64_t length);
    // Free the sequence's blocks (cached blocks stay with the prefix cache) and forget it.
    void finish(int64_t seq_id);

    Sequence* get(int64_t seq_id);
    bool has_work() const { return !running_.empty() || !waiting_.empty(); }
    SchedulerStats stats() const;
    const SchedulerConfig& config() const { return config_; }
    kv::KvPools& pools() { return pools_; }

   private:
    bool allocate(Sequence& seq, int64_t end);
    void preempt(Sequence& seq);
    void update_hashes(Sequence& seq);

    SchedulerConfig config_;
    kv::KvPools& pools_;
    kv::PrefixCache prefix_;
    std::map<int64_t, std::unique_ptr<Sequence>> seqs_;
    std::vector<int64_t> running_;  // in arrival order
    std::deque<int64_t> waiting_;   // FCFS; preempted sequences return in arrival order
    std::map<int64_t, std::vector<uint64_t>> hashes_;
    int64_t next_arrival_ = 0;
    int64_t preemptions_ = 0;
};

}  // namespace deepinfer::sched
