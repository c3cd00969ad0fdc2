// Logit penalties and token suppression, applied to fp32 logits before temperature (vLLM order).
#pragma once

#include <cstdint>
#include <span>

#include "deepinfer/sampling_params.h"
#include "sample/scratch.h"

namespace deepinfer::sample {

// vLLM's apply_penalties (vllm/model_executor/layers/utils.py), for one sequence:
//   repetition: every token seen in prompt_tokens or output_tokens, once: logit > 0 -> logit / r,
//               logit <= 0 -> logit * r;
//   frequency:  logit -= frequency_penalty * (occurrences in output_tokens);
//   presence:   logit -= presence_penalty for every token present in output_tokens.
// logits: fp32 [vocab]. Token ids must lie in [0, vocab) (checked). Cost O(|output|), plus O(|prompt|)
// only when repetition_penalty != 1 (the prompt is rescanned each step; no vocab-sized clears).
void apply_penalties(std::span<float> logits, const SamplingParams& p, std::span<const int32_t> prompt_tokens,
                     std::span<const int32_t> output_tokens, Scratch& scratch);

// Sets the logits of ids to -inf (min_tokens suppression of EOS / stop ids). logits: fp32 [vocab].
void suppress_tokens(std::span<float> logits, std::span<const int32_t> ids);

}  // namespace deepinfer::sample
