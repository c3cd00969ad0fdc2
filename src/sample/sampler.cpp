// sample_token: the all-in-one step over the pieces (order and semantics in sampler.h).
#include "sample/sampler.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace deepinfer::sample {

SampledToken sample_token(std::span<const float> logits, const SamplingParams& p,
                          std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens,
                          std::span<const int32_t> suppressed_ids, RequestRng& rng, Scratch& scratch) {
    const auto vocab = static_cast<int32_t>(logits.size());
    std::vector<float>& work = scratch.work(vocab);
    std::copy(logits.begin(), logits.end(), work.begin());
    const std::span<float> w(work.data(), logits.size());

    // vLLM V1 suppresses before penalising; the order does not matter: penalties keep -inf at -inf.
    apply_penalties(w, p, prompt_tokens, output_tokens, scratch);
    if (output_tokens.size() < static_cast<size_t>(std::max(p.min_tokens, 0))) suppress_tokens(w, suppressed_ids);

    SampledToken out;
    rng.set_step(output_tokens.size());
    const double u = rng.uniform();  // drawn for greedy too, so the cursor does not depend on temperature
    if (p.temperature == 0.0f) {
        // The argmax that to_probabilities' one-hot would hold, without writing and rescanning the vocabulary.
        out.token = argmax(w);
        DI_CHECK_MSG(out.token >= 0 && w[static_cast<size_t>(out.token)] > -std::numeric_limits<float>::infinity(),
                     "no finite logit to sample from");
    } else {
        to_probabilities(w, p, scratch);
        out.token = sample_from(w, u);
    }

    if (p.logprobs >= 0) {
        const Logprobs lp = log_softmax(logits);
        out.logprob = lp.of(out.token);
        top_logprobs(lp, p.logprobs, out.top, scratch);
    }
    return out;
}

}  // namespace deepinfer::sample
