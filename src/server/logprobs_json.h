// Logprobs in the two OpenAI shapes: completions ({tokens, token_logprobs, top_logprobs, text_offset}) and
// chat ({content: [{token, logprob, bytes, top_logprobs: [...]}]}). Token strings are each id decoded alone
// (lossy: a partial UTF-8 character shows as U+FFFD; chat's `bytes` carries the exact bytes).
#pragma once

#include <optional>
#include <span>

#include "deepinfer/engine.h"
#include "server/json_fields.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

// Accumulates completions-style logprobs; append() for each token in output order.
class CompletionLogprobs {
   public:
    explicit CompletionLogprobs(const tokenizer::Tokenizer& tok, size_t text_offset = 0) : tok_(tok), offset_(text_offset) {}
    // A token with its logprob; nullopt for a token that has none (the first prompt token under echo).
    void append(int32_t token, const std::optional<TokenLogprob>& lp);
    void append_all(std::span<const TokenLogprob> lps);
    Json to_json() const;
    bool empty() const { return tokens_.empty(); }
    size_t text_offset() const { return offset_; }

   private:
    const tokenizer::Tokenizer& tok_;
    size_t offset_;
    Json tokens_ = Json::array(), token_logprobs_ = Json::array(), top_logprobs_ = Json::array(),
         text_offset_ = Json::array();
};

// The entries of chat logprobs "content" for these tokens.
Json chat_logprob_entries(const tokenizer::Tokenizer& tok, std::span<const TokenLogprob> lps);

std::string token_text(const tokenizer::Tokenizer& tok, int32_t id);

}  // namespace deepinfer::server
