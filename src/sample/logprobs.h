// Log-probabilities reported to the client (OpenAI "logprobs" / vLLM SampleLogprobs).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sample/scratch.h"

namespace deepinfer::sample {

// Semantics: log-softmax of the raw model logits, before penalties, suppression, temperature and the
// top-k/top-p/min-p filters; this is vLLM V1's default (logprobs_mode "raw_logprobs"). It describes the
// model, so it is comparable across requests with different sampling settings, and a sampled token is
// never reported as -inf because a filter removed its neighbours. (vLLM V0 reported logprobs after
// penalties and temperature.) Computed stably: max, then log(sum exp(x - max)) with the fp32 terms of
// exp_nonpositive (relative error < 1e-7) accumulated in double.
struct Logprobs {
    // log p(token) for a given token; fp32 from a double computation.
    float of(int32_t token) const;
    double max = 0.0;            // largest raw logit
    double log_sum_exp = 0.0;    // log sum_i exp(logit_i - max)
    std::span<const float> logits;
};

// Normaliser of the raw logits. logits: fp32 [vocab], at least one finite (checked); -inf entries allowed.
Logprobs log_softmax(std::span<const float> logits);

// The n best tokens by raw logit (ties to the lower id), best first, with their logprobs; n is clamped to
// the vocabulary. Selection is O(vocab + c log n): the n-th largest value by streaming selection (select.h),
// then a partial sort of the c ids at or above it (c = n unless values tie there).
void top_logprobs(const Logprobs& lp, int32_t n, std::vector<std::pair<int32_t, float>>& out, Scratch& scratch);

}  // namespace deepinfer::sample
