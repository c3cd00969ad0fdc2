// The OpenAI request bodies this server accepts, parsed and type-checked into plain structs (no engine
// needed). Semantics follow vLLM's OpenAI server, except that unknown fields are listed for the server to
// refuse (OpenAI's behaviour, the default) or log and ignore (vLLM's, --allow-unknown-fields); fields that would change the result but are not supported (logit_bias, suffix, best_of > n,
// response_format other than text, automatic tool calling) are refused rather than silently dropped.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "deepinfer/sampling_params.h"
#include "server/json_fields.h"
#include "tokenizer/chat_format.h"

namespace deepinfer::server {

// Bounds on one request's work beyond those of validate_sampling_params.
inline constexpr size_t kMaxPromptsPerRequest = 256;
inline constexpr int kMaxLogprobs = 20;

// One prompt of a completion request: text, or token ids.
struct PromptInput {
    bool is_text = false;
    std::string text;
    std::vector<int32_t> ids;
};

struct CompletionRequest {
    std::string model;                 // empty: the served model
    std::vector<PromptInput> prompts;  // a list of prompts gives n choices each
    SamplingParams params;             // max_tokens defaults to 16 (OpenAI)
    bool echo = false;                 // prepend the prompt to each choice (and its logprobs)
    bool stream = false;
    bool include_usage = false;
    std::vector<std::string> ignored;  // unknown fields present in the body
};

struct ChatRequest {
    std::string model;
    std::vector<tokenizer::ChatMessage> messages;
    tokenizer::ChatRenderOptions render;
    SamplingParams params;
    bool max_tokens_given = false;     // else max_model_len - prompt length, as vLLM
    bool stream = false;
    bool include_usage = false;
    std::vector<std::string> ignored;
};

Expected<CompletionRequest> parse_completion_request(const Json& body);
Expected<ChatRequest> parse_chat_request(const Json& body);

}  // namespace deepinfer::server
