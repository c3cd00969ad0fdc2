// validate_sampling_params: the ranges follow vLLM's SamplingParams._verify_args and the OpenAI API
// reference. Floats are checked for NaN first: NaN compares false and would slip through range tests.
#include "sample/validate.h"

#include <cmath>

namespace deepinfer::sample {

Status validate_sampling_params(const SamplingParams& p, int32_t vocab_size, int32_t max_logprobs) {
    if (p.n < 1 || p.n > kMaxN) return invalid_argument("n must be in [1, {}], got {}", kMaxN, p.n);

    if (!std::isfinite(p.temperature) || p.temperature < 0.0f)
        return invalid_argument("temperature must be a finite number >= 0 (0 = greedy), got {}", p.temperature);
    if (!std::isfinite(p.top_p) || !(p.top_p > 0.0f && p.top_p <= 1.0f))
        return invalid_argument("top_p must be in (0, 1], got {}", p.top_p);
    if (p.top_k < -1) return invalid_argument("top_k must be -1 or 0 (disabled) or >= 1, got {}", p.top_k);
    if (!std::isfinite(p.min_p) || !(p.min_p >= 0.0f && p.min_p <= 1.0f))
        return invalid_argument("min_p must be in [0, 1], got {}", p.min_p);

    if (!std::isfinite(p.repetition_penalty) || !(p.repetition_penalty > 0.0f))
        return invalid_argument("repetition_penalty must be a finite number > 0 (1 = off), got {}",
                                p.repetition_penalty);
    if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2.0f)
        return invalid_argument("presence_penalty must be in [-2, 2], got {}", p.presence_penalty);
    if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2.0f)
        return invalid_argument("frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty);

    if (p.max_tokens < 1) return invalid_argument("max_tokens must be >= 1, got {}", p.max_tokens);
    if (p.min_tokens < 0 || p.min_tokens > p.max_tokens)
        return invalid_argument("min_tokens must be in [0, max_tokens = {}], got {}", p.max_tokens, p.min_tokens);

    if (p.stop.size() > static_cast<size_t>(kMaxStopStrings))
        return invalid_argument("stop must hold at most {} strings, got {}", kMaxStopStrings, p.stop.size());
    for (size_t i = 0; i < p.stop.size(); ++i)
        if (p.stop[i].empty()) return invalid_argument("stop[{}] must not be an empty string", i);
    for (size_t i = 0; i < p.stop_token_ids.size(); ++i) {
        const int32_t id = p.stop_token_ids[i];
        if (id < 0 || id >= vocab_size)
            return invalid_argument("stop_token_ids[{}] must be a token id in [0, {}), got {}", i, vocab_size, id);
    }

    if (p.logprobs < -1 || p.logprobs > max_logprobs)
        return invalid_argument("logprobs must be in [0, {}], or -1 for none, got {}", max_logprobs, p.logprobs);
    return Status::ok();
}

}  // namespace deepinfer::sample
