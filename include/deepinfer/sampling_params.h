// Per-request sampling parameters, with the meaning OpenAI / vLLM users expect. Validated by
// validate_sampling_params (src/sample) with an error naming the offending parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

struct SamplingParams {
    int n = 1;                          // independent completions of the same prompt
    float temperature = 1.0f;           // 0 = greedy
    float top_p = 1.0f;                 // nucleus mass in (0, 1]
    int top_k = 0;                      // 0 or -1 = off
    float min_p = 0.0f;                 // keep tokens with p >= min_p * p_max
    float repetition_penalty = 1.0f;    // > 0; divides positive / multiplies negative logits of seen tokens
    float presence_penalty = 0.0f;      // [-2, 2], subtracted once per token present in the output
    float frequency_penalty = 0.0f;     // [-2, 2], subtracted per occurrence in the output
    std::optional<uint64_t> seed;       // same seed + same prompt -> same tokens, whatever the batch
    int max_tokens = 16;                // new tokens at most
    int min_tokens = 0;                 // EOS / stop ids are suppressed before this many tokens
    std::vector<std::string> stop;      // stop strings (not included in the output text)
    std::vector<int32_t> stop_token_ids;
    bool ignore_eos = false;
    int logprobs = -1;                  // -1 = none; k >= 0: logprob of the sampled token and the top k
    bool skip_special_tokens = true;    // in the detokenized text
};

}  // namespace deepinfer
