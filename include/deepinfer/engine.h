// The engine: continuous batching over one model, as vLLM's LLMEngine. Requests arrive from any thread
// (submit); the engine loop (start() on its own thread, or step() driven by the caller) schedules,
// runs the model, samples and emits incremental outputs through each request's callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/sampling_params.h"
#include "deepinfer/status.h"

namespace deepinfer {

namespace tokenizer {
class Tokenizer;
}
namespace model {
struct ModelConfig;
}
namespace dist {
class Comm;
}

struct EngineConfig {
    std::string model_dir;                  // empty: the built-in tiny checkpoint
    int threads = 0;                        // 0: all cores
    int64_t num_kv_blocks = 0;              // blocks in the compressed-KV pool; 0: from kv_cache_memory
    int64_t kv_cache_memory = 0;            // bytes for both KV pools; 0: 1 GiB
    int block_tokens = 64;                  // positions per KV block
    int max_num_seqs = 64;
    int64_t max_num_batched_tokens = 2048;
    int64_t max_model_len = 0;              // 0: min(max_position_embeddings, what the KV pool holds)
    bool enable_prefix_caching = true;
    int max_waiting = 1024;                 // queued requests beyond this are refused (server: 429)
    int speculative_tokens = 0;             // DSpark drafts verified per step (0 = off, at most the block size)
    // Multi-rank replica (launched by mpirun): attention heads over tp ranks, routed experts over ep ranks;
    // the world size must equal max(tp, ep) and the smaller must divide it. Rank 0 runs the engine.
    int tp = 1;
    int ep = 1;
    bool engram_shared_memory = true;       // multi-rank: one copy of the Engram tables per host (POSIX shm)
};

struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;  // the `logprobs` most likely tokens
};

struct GenerationRequest {
    std::string id;
    std::vector<int32_t> prompt;
    SamplingParams params;
    // Teacher forcing: emit these tokens instead of sampling (the logits are still computed).
    std::vector<int32_t> forced_output;
    bool return_logits = false;  // attach the fp32 logits of every generated step
};

// One incremental event of one choice of a request.
struct GenerationOutput {
    std::string request_id;
    int index = 0;                        // choice index, 0..n-1
    std::vector<int32_t> token_ids;       // new tokens since the previous event
    std::string text;                     // new text since the previous event (stop strings removed)
    std::vector<TokenLogprob> logprobs;   // one per new token when requested
    std::vector<std::vector<float>> logits;  // one [vocab] row per new token when return_logits
    bool finished = false;
    std::string finish_reason;            // "stop", "length", "abort" when finished
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;        // so far
    int64_t cached_prompt_tokens = 0;     // prompt positions served from the prefix cache
    double time_to_first_token = 0.0;     // seconds, set from the first event on
};

struct EngineMetrics {
    int64_t waiting = 0, running = 0;
    int64_t kv_blocks_used = 0, kv_blocks_total = 0;         // compressed pool
    int64_t window_blocks_used = 0, window_blocks_total = 0;
    int64_t preemptions = 0;
    int64_t prompt_tokens = 0, generation_tokens = 0;
    int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;
    int64_t requests_finished = 0, requests_aborted = 0;
    int64_t spec_draft_tokens = 0, spec_accepted_tokens = 0;  // speculative decoding
    std::vector<double> ttft_seconds, tpot_seconds;           // recent samples (histograms)
};

class Engine {
   public:
    using Callback = std::function<void(const GenerationOutput&)>;

    // `world`: the communicator of a multi-rank replica (this process is its rank 0); null for one rank.
    static Expected<std::unique_ptr<Engine>> create(const EngineConfig& config, dist::Comm* world = nullptr);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Queue a request (thread-safe). Invalid parameters, an over-long prompt or a full queue are refused
    // here with a message naming the problem; nothing else is affected.
    Status submit(GenerationRequest request, Callback callback);
    // Cancel a request (thread-safe); its callback gets a final "abort" event and its blocks are freed.
    void abort(const std::string& request_id);

    // Drive the loop from the calling thread: one step; false when there was nothing to do.
    bool step();
    // Or run it on a background thread until stop(). stop(drain = true) finishes queued work first.
    void start();
    void stop(bool drain);

    // Offline: run every request to completion on the calling thread; outputs in request order, one
    // merged output per choice (all tokens, all text).
    Expected<std::vector<GenerationOutput>> generate(std::vector<GenerationRequest> requests);

    EngineMetrics metrics() const;
    const tokenizer::Tokenizer& tokenizer() const;
    const model::ModelConfig& model_config() const;
    const std::string& model_name() const;
    int64_t max_model_len() const;

   private:
    Engine();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Ranks > 0 of a multi-rank replica: load this rank's shard and replay rank 0's plans until it stops.
Status run_engine_follower(const EngineConfig& config, dist::Comm& world);

}  // namespace deepinfer
