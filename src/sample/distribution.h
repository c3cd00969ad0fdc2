// The sampling distribution of one step: temperature, min-p, top-k, top-p on fp32 logits, and inverse-CDF
// sampling from it. Exposed piecewise so speculative decoding can compare target and draft distributions.
#pragma once

#include <cstdint>
#include <span>

#include "deepinfer/sampling_params.h"
#include "sample/scratch.h"

namespace deepinfer::sample {

// Index of the largest value, ties to the lowest id; NaN entries are skipped. values: fp32 [vocab].
int32_t argmax(std::span<const float> values);

// Turns (penalised) logits into the final sampling distribution, in place. logits_in_probs_out: fp32
// [vocab]. Steps, in the order of vLLM V1's Sampler.sample (vllm/v1/sample/sampler.py):
//   temperature 0 -> one-hot on argmax (ties to the lowest id); otherwise x = logit / max(T, kMinTemperature);
//   min-p:  keep tokens with p >= min_p * p_max, i.e. exp(x - x_max) >= min_p (the max always survives);
//   top-k:  keep tokens whose x is >= the k-th largest x, so every token tied with the k-th stays (as vLLM);
//   top-p:  rank the survivors by x (ties by id) and keep a token while the mass ranked strictly before it,
//           renormalised over the survivors, is < top_p: the token that crosses top_p is kept (vLLM: drop
//           the ascending-order prefix whose cumulative mass is <= 1 - top_p).
// vLLM V0 and SGLang apply min-p last instead; min-p commutes with top-k but not with top-p (V1 measures
// the nucleus after min-p has removed the tail). Kept tokens get exp(x - max) / sum, every other entry
// exactly 0. Logits may hold -inf (suppressed) and must hold at least one finite value (checked).
// Cost, never a sort of the vocabulary: a few vectorised O(vocab) passes (temperature, max, exp, sums);
// min-p is one compaction pass; top-k one streaming selection of the k-th value (select.h); top-p first
// drops every token lighter than (1 - top_p) / n of the n survivors' mass (none of them can be in the
// nucleus), then truncate_to_nucleus (nucleus.h) sorts only the candidates of one histogram bucket.
void to_probabilities(std::span<float> logits_in_probs_out, const SamplingParams& p, Scratch& scratch);
// Same, with its own buffers (allocates; for tests and one-off use).
void to_probabilities(std::span<float> logits_in_probs_out, const SamplingParams& p);

// Inverse CDF: the first id whose cumulative probability exceeds u * sum(probs), skipping zero-probability
// ids, so a token outside the support is never returned. probs: fp32 [vocab], >= 0, not all zero (checked);
// they need not sum exactly to 1. u in [0, 1) (checked). O(vocab): vectorised double sums per block of 512
// entries, then a walk through the one block where the CDF crosses u * sum.
int32_t sample_from(std::span<const float> probs, double u);

}  // namespace deepinfer::sample
