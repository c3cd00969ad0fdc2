// The output side of one choice (sequence) of a request: sampled tokens, incremental text with stop
// strings held back until they can no longer match, logprobs, and the stop conditions of SamplingParams.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "sample/sampler.h"
#include "tokenizer/detokenizer.h"

namespace deepinfer::engine {

struct RequestState;

struct ChoiceState {
    RequestState* request = nullptr;
    int index = 0;
    int64_t seq_id = 0;
    std::vector<int32_t> output;        // generated token ids
    std::optional<tokenizer::IncrementalDetokenizer> detok;
    std::string text;                   // all text so far (before the stop-string cut)
    size_t text_sent = 0;               // bytes of `text` already emitted
    sample::RequestRng rng;
    bool finished = false;
    std::string finish_reason;
    bool first_token_sent = false;
    std::chrono::steady_clock::time_point last_token_time;

    ChoiceState(uint64_t seed, int index_) : index(index_), rng(seed, static_cast<uint32_t>(index_)) {}
};

struct RequestState {
    GenerationRequest request;
    Engine::Callback callback;
    std::vector<ChoiceState> choices;
    std::chrono::steady_clock::time_point arrival;
    int64_t cached_prompt_tokens = 0;
    int n_finished = 0;
};

// Decide the next token of a choice from its logits row (teacher forcing or the sampler).
sample::SampledToken choose_token(ChoiceState& choice, const float* logits, int32_t vocab, int32_t eos_id,
                                  sample::Scratch& scratch);

// Append a token, update text and stop conditions; returns the event to emit (finished set if done).
// eos_id and max_model_len come from the model; `logits` is attached when return_logits.
GenerationOutput advance(ChoiceState& choice, const sample::SampledToken& token, int32_t eos_id, int64_t seq_len,
                         int64_t max_model_len, const float* logits, int32_t vocab);

}  // namespace deepinfer::engine
