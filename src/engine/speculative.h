// DSpark speculative decoding in the engine (spec §7.3): drafts proposed by Model::draft after a
// sequence's newest token are appended as unverified rows; the next step runs them through the backbone
// in one chunk and commits the accepted prefix plus one token from the first rejected (or final) row.
// Greedy: accept while the draft equals the target's argmax (identical to plain greedy decoding). Sampling:
// lossless rejection sampling against the draft's temperature distribution.
#pragma once

#include <cstdint>

#include "engine/choice_state.h"

namespace deepinfer::engine {

// The token committed at verify row i: the draft `draft` if accepted (*accepted = true), else a token from
// the target's residual distribution. draft_logits: the Markov-biased logits [vocab] the draft was sampled
// from (draft_temperature > 0 only). For the row after the last draft, call choose_token instead.
sample::SampledToken verify_row(ChoiceState& choice, const float* logits, int32_t vocab, int32_t eos_id,
                                int32_t draft, const float* draft_logits, float draft_temperature,
                                sample::Scratch& scratch, bool* accepted);

}  // namespace deepinfer::engine
