// Draft verification (greedy and rejection sampling).
#include "engine/speculative.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace deepinfer::engine {

sample::SampledToken verify_row(ChoiceState& choice, const float* logits, int32_t vocab, int32_t eos_id, int32_t draft,
                                const float* draft_logits, float draft_temperature, sample::Scratch& scratch,
                                bool* accepted) {
    const GenerationRequest& r = choice.request->request;
    const SamplingParams& p = r.params;
    if (p.temperature == 0.0f) {
        // Greedy: the committed token is the target's argmax either way.
        sample::SampledToken t = choose_token(choice, logits, vocab, eos_id, scratch);
        *accepted = t.token == draft;
        return t;
    }
    // Target distribution after penalties, suppression and filters (what plain sampling would draw from).
    std::span<const float> row(logits, static_cast<size_t>(vocab));
    std::vector<float> target(row.begin(), row.end());
    sample::apply_penalties(target, p, r.prompt, choice.output, scratch);
    if (static_cast<int>(choice.output.size()) < p.min_tokens) {
        std::vector<int32_t> suppressed = p.stop_token_ids;
        if (!p.ignore_eos) suppressed.push_back(eos_id);
        sample::suppress_tokens(target, suppressed);
    }
    sample::to_probabilities(target, p, scratch);
    // Draft distribution: softmax(draft_logits / T), the Gumbel-max draw of Model::draft.
    std::vector<float> q(draft_logits, draft_logits + vocab);
    const float t = std::max(draft_temperature, 1e-5f);
    float mx = *std::max_element(q.begin(), q.end());
    double sum = 0.0;
    for (auto& v : q) sum += (v = std::exp((v - mx) / t));
    for (auto& v : q) v = static_cast<float>(v / sum);
    const uint64_t step = choice.output.size();
    const double u_accept = choice.rng.uniform_at(step, 1);
    sample::SampledToken out;
    if (u_accept * q[draft] < target[draft]) {
        *accepted = true;
        out.token = draft;
    } else {
        *accepted = false;
        double residual_sum = 0.0;
        for (int32_t v = 0; v < vocab; ++v) residual_sum += (target[v] = std::max(0.0f, target[v] - q[v]));
        if (residual_sum <= 0.0) {  // p <= q everywhere except at the draft: fall back to p itself
            std::copy(row.begin(), row.end(), target.begin());
            sample::to_probabilities(target, p, scratch);
        } else {
            for (auto& v : target) v = static_cast<float>(v / residual_sum);
        }
        out.token = sample::sample_from(target, choice.rng.uniform_at(step, 0));
    }
    if (p.logprobs >= 0) {
        sample::Logprobs lp = sample::log_softmax(row);
        out.logprob = lp.of(out.token);
        sample::top_logprobs(lp, p.logprobs, out.top, scratch);
    }
    return out;
}

}  // namespace deepinfer::engine
