// Request parsing for /v1/completions and /v1/chat/completions (see protocol.h). Field lists and defaults
// follow the OpenAI API reference and vLLM's protocol.py; vLLM's sampling extensions (top_k, min_p,
// repetition_penalty, min_tokens, stop_token_ids, ignore_eos, skip_special_tokens) are accepted too.
#include "server/protocol.h"

#include <algorithm>
#include <set>

namespace deepinfer::server {
namespace {

// Fields read or deliberately accepted without effect (user, metadata, ...), per endpoint.
const std::set<std::string, std::less<>> kCommonFields = {
    "model", "stream", "stream_options", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "seed", "max_tokens", "min_tokens", "stop", "stop_token_ids",
    "ignore_eos", "n", "logprobs", "skip_special_tokens", "logit_bias", "user", "metadata", "store",
    "service_tier", "spaces_between_special_tokens", "include_stop_str_in_output"};
const std::set<std::string, std::less<>> kCompletionFields = {"prompt", "echo", "suffix", "best_of"};
const std::set<std::string, std::less<>> kChatFields = {
    "messages", "max_completion_tokens", "top_logprobs", "chat_template_kwargs", "reasoning_effort", "tools",
    "tool_choice", "parallel_tool_calls", "response_format", "continue_final_message", "add_generation_prompt",
    "functions", "function_call", "modalities"};

std::vector<std::string> unknown_fields(const Json& body, const std::set<std::string, std::less<>>& own) {
    std::vector<std::string> out;
    for (auto it = body.begin(); it != body.end(); ++it)
        if (!kCommonFields.count(it.key()) && !own.count(it.key())) out.push_back(it.key());
    return out;
}

Status read_stream(const Json& body, bool* stream, bool* include_usage) {
    DI_RETURN_IF_ERROR(read_bool(body, "stream", stream));
    if (!has_field(body, "stream_options")) return Status::ok();
    const Json& so = body["stream_options"];
    if (!so.is_object()) return invalid_argument("stream_options must be an object, got {}", describe_json(so));
    if (!*stream) return invalid_argument("stream_options: allowed only when stream is true");
    return read_bool(so, "include_usage", include_usage, "stream_options.");
}

// The sampling fields both endpoints share. `logprobs` differs per endpoint and is read by the caller.
Status read_sampling(const Json& body, SamplingParams* p) {
    DI_RETURN_IF_ERROR(read_int(body, "n", &p->n));
    DI_RETURN_IF_ERROR(read_float(body, "temperature", &p->temperature));
    DI_RETURN_IF_ERROR(read_float(body, "top_p", &p->top_p));
    DI_RETURN_IF_ERROR(read_int(body, "top_k", &p->top_k));
    DI_RETURN_IF_ERROR(read_float(body, "min_p", &p->min_p));
    DI_RETURN_IF_ERROR(read_float(body, "presence_penalty", &p->presence_penalty));
    DI_RETURN_IF_ERROR(read_float(body, "frequency_penalty", &p->frequency_penalty));
    DI_RETURN_IF_ERROR(read_float(body, "repetition_penalty", &p->repetition_penalty));
    if (has_field(body, "seed")) {
        uint64_t seed = 0;
        DI_RETURN_IF_ERROR(read_seed(body, "seed", &seed));
        p->seed = seed;
    }
    DI_RETURN_IF_ERROR(read_int(body, "max_tokens", &p->max_tokens));
    DI_RETURN_IF_ERROR(read_int(body, "min_tokens", &p->min_tokens));
    DI_RETURN_IF_ERROR(read_string_or_list(body, "stop", &p->stop));
    DI_RETURN_IF_ERROR(read_token_ids(body, "stop_token_ids", &p->stop_token_ids));
    DI_RETURN_IF_ERROR(read_bool(body, "ignore_eos", &p->ignore_eos));
    DI_RETURN_IF_ERROR(read_bool(body, "skip_special_tokens", &p->skip_special_tokens));
    bool include_stop = false;
    DI_RETURN_IF_ERROR(read_bool(body, "include_stop_str_in_output", &include_stop));
    if (include_stop) return invalid_argument("include_stop_str_in_output: true is not supported (stop strings are cut)");
    if (has_field(body, "logit_bias")) {
        const Json& lb = body["logit_bias"];
        if (!lb.is_object()) return invalid_argument("logit_bias must be an object, got {}", describe_json(lb));
        if (!lb.empty()) return invalid_argument("logit_bias is not supported by this server");
    }
    return Status::ok();
}

Status read_model(const Json& body, std::string* model) { return read_string(body, "model", model); }

Expected<std::vector<PromptInput>> read_prompts(const Json& body) {
    if (!has_field(body, "prompt")) return invalid_argument("prompt: required (a string, a list of strings, a list of token ids or a list of such lists)");
    const Json& p = body["prompt"];
    std::vector<PromptInput> out;
    if (p.is_string()) {
        out.push_back({true, p.get<std::string>(), {}});
        return out;
    }
    if (!p.is_array())
        return invalid_argument("prompt must be a string, a list of strings, a list of token ids or a list of such lists, got {}",
                                describe_json(p));
    if (p.empty()) return invalid_argument("prompt must not be an empty list");
    if (p[0].is_number()) {
        PromptInput in;
        Json wrapper = {{"prompt", p}};
        DI_RETURN_IF_ERROR(read_token_ids(wrapper, "prompt", &in.ids));
        out.push_back(std::move(in));
        return out;
    }
    if (p.size() > kMaxPromptsPerRequest)
        return invalid_argument("prompt: at most {} prompts per request, got {}", kMaxPromptsPerRequest, p.size());
    for (size_t i = 0; i < p.size(); ++i) {
        const Json& item = p[i];
        if (item.is_string()) {
            out.push_back({true, item.get<std::string>(), {}});
        } else if (item.is_array()) {
            PromptInput in;
            Json wrapper = {{"prompt", item}};
            Status s = read_token_ids(wrapper, "prompt", &in.ids);
            if (!s.is_ok()) return invalid_argument("prompt[{}]{}", i, s.message().substr(6));
            out.push_back(std::move(in));
        } else {
            return invalid_argument("prompt[{}] must be a string or a list of token ids, got {}", i, describe_json(item));
        }
    }
    return out;
}

Status read_thinking_options(const Json& body, tokenizer::ChatRenderOptions* render) {
    // Top-level reasoning_effort (OpenAI field): "none" selects chat mode, as vLLM's V4.1 adapter does.
    auto apply_effort = [&](const Json& v, const std::string& name) -> Status {
        std::string text;
        if (v.is_string()) {
            text = v.get<std::string>();
        } else if (v.is_number_integer()) {
            text = std::to_string(v.get<int64_t>());
        } else {
            return invalid_argument("{} must be a string (\"none\", \"low\", \"high\", \"max\") or an integer in 1..100, got {}",
                                    name, describe_json(v));
        }
        if (text == "none") {
            render->thinking_mode = tokenizer::ThinkingMode::kChat;
            return Status::ok();
        }
        Expected<int> effort = tokenizer::parse_reasoning_effort(text);
        if (!effort) return invalid_argument("{}: {}", name, effort.status().message());
        render->thinking_mode = tokenizer::ThinkingMode::kThinking;
        render->reasoning_effort = *effort;
        return Status::ok();
    };
    if (has_field(body, "reasoning_effort")) DI_RETURN_IF_ERROR(apply_effort(body["reasoning_effort"], "reasoning_effort"));
    if (!has_field(body, "chat_template_kwargs")) return Status::ok();
    const Json& kw = body["chat_template_kwargs"];
    if (!kw.is_object()) return invalid_argument("chat_template_kwargs must be an object, got {}", describe_json(kw));
    if (has_field(kw, "reasoning_effort"))
        DI_RETURN_IF_ERROR(apply_effort(kw["reasoning_effort"], "chat_template_kwargs.reasoning_effort"));
    for (const char* key : {"thinking", "enable_thinking"}) {
        bool thinking = render->thinking_mode == tokenizer::ThinkingMode::kThinking;
        DI_RETURN_IF_ERROR(read_bool(kw, key, &thinking, "chat_template_kwargs."));
        if (has_field(kw, key))
            render->thinking_mode = thinking ? tokenizer::ThinkingMode::kThinking : tokenizer::ThinkingMode::kChat;
    }
    DI_RETURN_IF_ERROR(read_bool(kw, "drop_thinking", &render->drop_thinking, "chat_template_kwargs."));
    return Status::ok();
}

Status read_tools(const Json& body, tokenizer::ChatRenderOptions* render) {
    for (const char* key : {"functions", "function_call"})
        if (has_field(body, key)) return invalid_argument("{} is deprecated and not supported; use tools with tool_choice \"none\"", key);
    if (!has_field(body, "tools")) return Status::ok();
    const Json& tools = body["tools"];
    if (!tools.is_array()) return invalid_argument("tools must be a list, got {}", describe_json(tools));
    if (tools.empty()) return Status::ok();
    // Without a tool-call parser the server cannot return tool_calls; like vLLM without
    // --enable-auto-tool-choice it accepts tools only with tool_choice "none" (tools shown in the prompt).
    const bool choice_none = body.contains("tool_choice") && body["tool_choice"].is_string() &&
                             body["tool_choice"].get<std::string>() == "none";
    if (!choice_none)
        return invalid_argument("tool_choice: tool calling is not supported by this server; send tool_choice \"none\" "
                                "to show the tools in the prompt without parsing calls");
    render->tools_json = tools.dump();
    return Status::ok();
}

Status read_response_format(const Json& body) {
    if (!has_field(body, "response_format")) return Status::ok();
    const Json& rf = body["response_format"];
    if (!rf.is_object()) return invalid_argument("response_format must be an object, got {}", describe_json(rf));
    std::string type = "text";
    DI_RETURN_IF_ERROR(read_string(rf, "type", &type, "response_format."));
    if (type != "text")
        return invalid_argument("response_format.type \"{}\" is not supported (no guided decoding); only \"text\"", type);
    return Status::ok();
}

}  // namespace

Expected<CompletionRequest> parse_completion_request(const Json& body) {
    CompletionRequest r;
    DI_RETURN_IF_ERROR(read_model(body, &r.model));
    DI_ASSIGN_OR_RETURN(r.prompts, read_prompts(body));
    DI_RETURN_IF_ERROR(read_sampling(body, &r.params));
    DI_RETURN_IF_ERROR(read_stream(body, &r.stream, &r.include_usage));
    DI_RETURN_IF_ERROR(read_bool(body, "echo", &r.echo));
    int64_t logprobs = -1;
    DI_RETURN_IF_ERROR(read_int(body, "logprobs", 0, kMaxLogprobs, &logprobs));
    r.params.logprobs = static_cast<int>(logprobs);
    std::string suffix;
    DI_RETURN_IF_ERROR(read_string(body, "suffix", &suffix));
    if (!suffix.empty()) return invalid_argument("suffix is not supported by this server");
    int best_of = r.params.n;
    DI_RETURN_IF_ERROR(read_int(body, "best_of", &best_of));
    if (best_of != r.params.n) return invalid_argument("best_of must equal n (ranking extra samples is not supported), got {}", best_of);
    r.ignored = unknown_fields(body, kCompletionFields);
    return r;
}

Expected<ChatRequest> parse_chat_request(const Json& body) {
    ChatRequest r;
    DI_RETURN_IF_ERROR(read_model(body, &r.model));
    if (!has_field(body, "messages")) return invalid_argument("messages: required (a list of chat messages)");
    const Json& messages = body["messages"];
    if (!messages.is_array()) return invalid_argument("messages must be a list, got {}", describe_json(messages));
    if (messages.empty()) return invalid_argument("messages must not be empty");
    DI_ASSIGN_OR_RETURN(r.messages, tokenizer::chat_messages_from_json(messages));
    // The engine runs V4.1's text model; the vision encoder's tensors are not loaded (spec §3.1). An image part
    // would be the image token with no image behind it, the picture silently ignored: refused, as vLLM refuses
    // images for a model it serves without multimodal support.
    for (size_t m = 0; m < r.messages.size(); ++m) {
        if (!r.messages[m].image_parts.empty())
            return invalid_argument("messages[{}].content[{}] is an image part; this server runs the text model only "
                                    "(the vision encoder is not loaded)", m, r.messages[m].image_parts[0]);
    }
    DI_RETURN_IF_ERROR(read_sampling(body, &r.params));
    r.max_tokens_given = has_field(body, "max_tokens");
    if (has_field(body, "max_completion_tokens")) {
        DI_RETURN_IF_ERROR(read_int(body, "max_completion_tokens", &r.params.max_tokens));
        r.max_tokens_given = true;
    }
    DI_RETURN_IF_ERROR(read_stream(body, &r.stream, &r.include_usage));
    bool logprobs = false;
    DI_RETURN_IF_ERROR(read_bool(body, "logprobs", &logprobs));
    int64_t top = -1;
    DI_RETURN_IF_ERROR(read_int(body, "top_logprobs", 0, kMaxLogprobs, &top));
    if (top >= 0 && !logprobs) return invalid_argument("top_logprobs: requires logprobs to be true");
    r.params.logprobs = logprobs ? static_cast<int>(std::max<int64_t>(top, 0)) : -1;
    DI_RETURN_IF_ERROR(read_thinking_options(body, &r.render));
    DI_RETURN_IF_ERROR(read_tools(body, &r.render));
    DI_RETURN_IF_ERROR(read_response_format(body));
    bool add_generation_prompt = true, continue_final = false;
    DI_RETURN_IF_ERROR(read_bool(body, "add_generation_prompt", &add_generation_prompt));
    DI_RETURN_IF_ERROR(read_bool(body, "continue_final_message", &continue_final));
    if (continue_final) {
        // vLLM's continue_final_message: the last assistant message stays open and the model continues it.
        if (r.messages.back().role != tokenizer::ChatRole::kAssistant)
            return invalid_argument("continue_final_message: the last message must have role \"assistant\"");
        if (add_generation_prompt)
            return invalid_argument("continue_final_message: set add_generation_prompt to false to continue the final message");
        r.messages.back().without_eos = true;
    } else if (!add_generation_prompt) {
        return invalid_argument("add_generation_prompt: false is supported only with continue_final_message true");
    }
    r.ignored = unknown_fields(body, kChatFields);
    return r;
}

}  // namespace deepinfer::server
