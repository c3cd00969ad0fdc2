// Token choice, stop conditions and incremental text of one choice.
#include "engine/choice_state.h"

#include <algorithm>

namespace deepinfer::engine {

sample::SampledToken choose_token(ChoiceState& choice, const float* logits, int32_t vocab, int32_t eos_id,
                                  sample::Scratch& scratch) {
    const GenerationRequest& r = choice.request->request;
    const SamplingParams& p = r.params;
    std::span<const float> row(logits, static_cast<size_t>(vocab));
    if (choice.output.size() < r.forced_output.size()) {
        // Teacher forcing: the given token, with the logprob the model assigns it.
        sample::SampledToken forced;
        forced.token = r.forced_output[choice.output.size()];
        if (p.logprobs >= 0) {
            sample::Logprobs lp = sample::log_softmax(row);
            forced.logprob = lp.of(forced.token);
            sample::top_logprobs(lp, p.logprobs, forced.top, scratch);
        }
        return forced;
    }
    // EOS and stop ids are suppressed until min_tokens tokens exist (vLLM semantics).
    std::vector<int32_t> suppressed;
    if (static_cast<int>(choice.output.size()) < p.min_tokens) {
        if (!p.ignore_eos) suppressed.push_back(eos_id);
        suppressed.insert(suppressed.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
    }
    return sample::sample_token(row, p, r.prompt, choice.output, suppressed, choice.rng, scratch);
}

GenerationOutput advance(ChoiceState& choice, const sample::SampledToken& token, int32_t eos_id, int64_t seq_len,
                         int64_t max_model_len, const float* logits, int32_t vocab) {
    const GenerationRequest& r = choice.request->request;
    const SamplingParams& p = r.params;
    GenerationOutput ev;
    ev.request_id = r.id;
    ev.index = choice.index;
    ev.prompt_tokens = static_cast<int64_t>(r.prompt.size());
    ev.cached_prompt_tokens = choice.request->cached_prompt_tokens;
    choice.output.push_back(token.token);
    ev.token_ids.push_back(token.token);
    if (p.logprobs >= 0) ev.logprobs.push_back({token.token, token.logprob, token.top});
    if (r.return_logits) ev.logits.emplace_back(logits, logits + vocab);

    const bool is_eos = token.token == eos_id && !p.ignore_eos;
    const bool is_stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token.token) != p.stop_token_ids.end();
    // Text: stop ids and EOS end the sequence without text of their own.
    if (!(is_eos || is_stop_id)) {
        auto piece = choice.detok->push(token.token);
        if (piece) choice.text += *piece;
    }
    if (is_eos || is_stop_id) {
        choice.finished = true;
        choice.finish_reason = "stop";
    } else if (static_cast<int>(choice.output.size()) >= p.max_tokens || seq_len >= max_model_len) {
        choice.finished = true;
        choice.finish_reason = "length";
    }
    if (choice.finished) choice.text += choice.detok->flush();

    // Stop strings: cut at the earliest match; otherwise hold back what could still start a match.
    size_t emit_to = choice.text.size();
    size_t longest_stop = 0;
    for (const auto& s : p.stop) longest_stop = std::max(longest_stop, s.size());
    if (longest_stop > 0) {
        size_t search_from = choice.text_sent > longest_stop ? choice.text_sent - longest_stop : 0;
        size_t cut = std::string::npos;
        for (const auto& s : p.stop) {
            size_t at = choice.text.find(s, search_from);
            if (at != std::string::npos) cut = std::min(cut, at);
        }
        if (cut != std::string::npos) {
            choice.text.resize(cut);
            emit_to = cut;
            if (!choice.finished) {
                choice.finished = true;
                choice.finish_reason = "stop";
            }
        } else if (!choice.finished) {
            emit_to = choice.text.size() > longest_stop - 1 ? choice.text.size() - (longest_stop - 1) : 0;
            // Never split a UTF-8 character when holding back.
            while (emit_to > choice.text_sent && emit_to < choice.text.size() &&
                   (static_cast<unsigned char>(choice.text[emit_to]) & 0xc0) == 0x80)
                --emit_to;
        }
    }
    if (emit_to > choice.text_sent) {
        ev.text = choice.text.substr(choice.text_sent, emit_to - choice.text_sent);
        choice.text_sent = emit_to;
    }
    ev.completion_tokens = static_cast<int64_t>(choice.output.size());
    ev.finished = choice.finished;
    ev.finish_reason = choice.finish_reason;
    return ev;
}

}  // namespace deepinfer::engine
