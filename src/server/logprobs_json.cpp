// Logprob JSON builders (see logprobs_json.h).
#include "server/logprobs_json.h"

#include <cmath>

namespace deepinfer::server {

std::string token_text(const tokenizer::Tokenizer& tok, int32_t id) {
    const int32_t ids[1] = {id};
    Expected<std::string> text = tok.decode(ids, false);
    return text ? *text : std::string();
}

namespace {

Json token_bytes(const tokenizer::Tokenizer& tok, int32_t id) {
    const int32_t ids[1] = {id};
    std::string raw;
    Json bytes = Json::array();
    if (tok.decode_bytes(ids, false, raw).is_ok())
        for (unsigned char c : raw) bytes.push_back(static_cast<int>(c));
    return bytes;
}

// JSON has no -Infinity: a token the sampler excluded (-inf) is reported with the most negative float,
// as vLLM does.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

}  // namespace

void CompletionLogprobs::append(int32_t token, const std::optional<TokenLogprob>& lp) {
    const std::string text = token_text(tok_, token);
    tokens_.push_back(text);
    text_offset_.push_back(offset_);
    offset_ += text.size();
    if (!lp) {
        token_logprobs_.push_back(nullptr);
        top_logprobs_.push_back(nullptr);
        return;
    }
    token_logprobs_.push_back(finite_logprob(lp->logprob));
    // vLLM: the sampled token is always in the dict, so it holds up to logprobs + 1 entries.
    Json top = Json::object();
    for (const auto& [id, value] : lp->top) top[token_text(tok_, id)] = finite_logprob(value);
    if (!top.contains(text)) top[text] = finite_logprob(lp->logprob);
    top_logprobs_.push_back(std::move(top));
}

void CompletionLogprobs::append_all(std::span<const TokenLogprob> lps) {
    for (const auto& lp : lps) append(lp.token, lp);
}

Json CompletionLogprobs::to_json() const {
    return Json{{"tokens", tokens_}, {"token_logprobs", token_logprobs_}, {"top_logprobs", top_logprobs_},
                {"text_offset", text_offset_}};
}

Json chat_logprob_entries(const tokenizer::Tokenizer& tok, std::span<const TokenLogprob> lps) {
    Json out = Json::array();
    for (const auto& lp : lps) {
        Json top = Json::array();
        for (const auto& [id, value] : lp.top)
            top.push_back(Json{{"token", token_text(tok, id)}, {"logprob", finite_logprob(value)}, {"bytes", token_bytes(tok, id)}});
        out.push_back(Json{{"token", token_text(tok, lp.token)},
                           {"logprob", finite_logprob(lp.logprob)},
                           {"bytes", token_bytes(tok, lp.token)},
                           {"top_logprobs", std::move(top)}});
    }
    return out;
}

}  // namespace deepinfer::server
