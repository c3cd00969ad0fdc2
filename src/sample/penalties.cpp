// Repetition / frequency / presence penalties and suppression (see penalties.h for the vLLM reference).
#include "sample/penalties.h"

#include <limits>

#include "core/check.h"

namespace deepinfer::sample {

namespace {
void check_ids(std::span<const int32_t> ids, size_t vocab, const char* what) {
    for (int32_t id : ids)
        DI_CHECK_MSG(id >= 0 && static_cast<size_t>(id) < vocab, "{} token id {} outside vocabulary {}", what, id,
                     vocab);
}
}  // namespace

void apply_penalties(std::span<float> logits, const SamplingParams& p, std::span<const int32_t> prompt_tokens,
                     std::span<const int32_t> output_tokens, Scratch& scratch) {
    const auto vocab = static_cast<int32_t>(logits.size());
    const bool repetition = p.repetition_penalty != 1.0f;
    const bool frequency  = p.frequency_penalty != 0.0f;
    const bool presence   = p.presence_penalty != 0.0f;
    check_ids(output_tokens, logits.size(), "output");

    if (repetition) {
        check_ids(prompt_tokens, logits.size(), "prompt");
        const float r = p.repetition_penalty;
        scratch.begin_epoch(vocab);
        auto penalise_once = [&](int32_t id) {
            if (!scratch.mark(id)) return;
            float& x = logits[static_cast<size_t>(id)];
            x = x > 0.0f ? x / r : x * r;
        };
        for (int32_t id : prompt_tokens) penalise_once(id);
        for (int32_t id : output_tokens) penalise_once(id);
    }

    if (frequency || presence) {
        // Count first, then subtract penalty * count once per token: the same roundings as vLLM's
        // "logits -= frequency_penalties * output_bin_counts", not count separate subtractions.
        std::vector<int32_t>& counts = scratch.counts(vocab);
        for (int32_t id : output_tokens) ++counts[static_cast<size_t>(id)];
        for (int32_t id : output_tokens) {
            int32_t& count = counts[static_cast<size_t>(id)];
            if (count == 0) continue;  // already applied for this id
            float& x = logits[static_cast<size_t>(id)];
            x -= p.frequency_penalty * static_cast<float>(count);
            x -= p.presence_penalty;
            count = 0;  // leaves counts all zero for the next user
        }
    }
}

void suppress_tokens(std::span<float> logits, std::span<const int32_t> ids) {
    check_ids(ids, logits.size(), "suppressed");
    for (int32_t id : ids) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
}

}  // namespace deepinfer::sample
