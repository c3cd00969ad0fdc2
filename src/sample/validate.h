// Request-time validation of SamplingParams, with the ranges OpenAI / vLLM document. Every failure is an
// InvalidArgument Status whose message starts with the parameter name and states the allowed range.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "deepinfer/sampling_params.h"

namespace deepinfer::sample {

// Limits that are our choice rather than the API's (both are "16" in the issue; OpenAI allows n up to 128
// and 4 stop strings, vLLM has no caps). They bound the work one request can ask for.
inline constexpr int kMaxN           = 16;
inline constexpr int kMaxStopStrings = 16;
// Temperatures in (0, kMinTemperature) are raised to kMinTemperature, as vLLM does, so logits / T stays
// finite; 0 means greedy. There is no upper limit (vLLM has none; large T tends to uniform).
inline constexpr float kMinTemperature = 0.01f;

// Checks every field of p against the vocabulary size and the server's logprobs limit. Returns the first
// problem found, e.g. "top_p must be in (0, 1], got 0".
Status validate_sampling_params(const SamplingParams& p, int32_t vocab_size, int32_t max_logprobs = 20);

}  // namespace deepinfer::sample
