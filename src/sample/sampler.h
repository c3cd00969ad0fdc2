// One sampling step for one sequence: penalties -> min_tokens suppression -> temperature -> min-p -> top-k
// -> top-p -> inverse-CDF draw, plus the logprobs the request asked for. The pieces live in penalties.h,
// distribution.h, logprobs.h and request_rng.h for callers (speculative decoding) that need them apart.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "deepinfer/sampling_params.h"
#include "sample/distribution.h"
#include "sample/logprobs.h"
#include "sample/penalties.h"
#include "sample/request_rng.h"
#include "sample/scratch.h"
#include "sample/validate.h"

namespace deepinfer::sample {

struct SampledToken {
    int32_t token = -1;
    // Raw-logit log-probability of token (see logprobs.h); NaN when the request did not ask (logprobs == -1).
    float logprob = std::numeric_limits<float>::quiet_NaN();
    // The p.logprobs most likely tokens under the raw logits, best first, ties to the lower id.
    std::vector<std::pair<int32_t, float>> top;
};

// logits: fp32 [vocab], the model's raw output for this position (not modified; penalties work on a copy
// in scratch). prompt_tokens / output_tokens: the sequence so far (output = generated tokens of this
// completion, which also fixes the RNG step: draw (step = output_tokens.size(), k = 0)). suppressed_ids:
// EOS and stop_token_ids; they are set to -inf while output_tokens.size() < p.min_tokens, so the caller
// may pass the same ids on every step. p must have passed validate_sampling_params. Leaves rng's
// sequential cursor at (this step, k = 1).
SampledToken sample_token(std::span<const float> logits, const SamplingParams& p,
                          std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens,
                          std::span<const int32_t> suppressed_ids, RequestRng& rng, Scratch& scratch);

}  // namespace deepinfer::sample
