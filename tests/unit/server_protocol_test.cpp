// Request parsing of the OpenAI routes (src/server/protocol.h): every accepted form, and every wrong type or
// unsupported option refused with a message whose leading word is the parameter (as the API's "param").
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/protocol.h"

namespace deepinfer::server {
namespace {

Json body(const char* text) { return Json::parse(text); }

// The request is refused and the error names `param`, and its message contains `fragment`.
template <typename Parse>
void expect_refused(Parse parse, const char* text, const std::string& param, const std::string& fragment) {
    auto r = parse(body(text));
    ASSERT_FALSE(r.has_value()) << "accepted: " << text;
    ApiError e = from_status(r.status());
    EXPECT_EQ(e.status, 400) << text;
    EXPECT_EQ(e.param, param) << text << " -> " << e.message;
    EXPECT_NE(e.message.find(fragment), std::string::npos) << e.message;
}

void completion_refused(const char* text, const std::string& param, const std::string& fragment) {
    expect_refused(parse_completion_request, text, param, fragment);
}
void chat_refused(const char* text, const std::string& param, const std::string& fragment) {
    expect_refused(parse_chat_request, text, param, fragment);
}

TEST(ServerProtocol, CompletionPromptForms) {
    auto one = parse_completion_request(body(R"({"prompt": "hello"})"));
    ASSERT_TRUE(one.has_value());
    ASSERT_EQ(one->prompts.size(), 1u);
    EXPECT_TRUE(one->prompts[0].is_text);
    EXPECT_EQ(one->params.max_tokens, 16);  // OpenAI's default

    auto ids = parse_completion_request(body(R"({"prompt": [5, 6, 7]})"));
    ASSERT_TRUE(ids.has_value());
    ASSERT_EQ(ids->prompts.size(), 1u);
    EXPECT_EQ(ids->prompts[0].ids, (std::vector<int32_t>{5, 6, 7}));

    auto many = parse_completion_request(body(R"({"prompt": ["a", "b", "c"], "n": 2})"));
    ASSERT_TRUE(many.has_value());
    EXPECT_EQ(many->prompts.size(), 3u);
    EXPECT_EQ(many->params.n, 2);

    auto lists = parse_completion_request(body(R"({"prompt": [[1, 2], [3]]})"));
    ASSERT_TRUE(lists.has_value());
    ASSERT_EQ(lists->prompts.size(), 2u);
    EXPECT_EQ(lists->prompts[1].ids, (std::vector<int32_t>{3}));
}

TEST(ServerProtocol, CompletionSamplingFields) {
    auto r = parse_completion_request(body(R"({"prompt": "x", "temperature": 0, "top_p": 0.5, "top_k": 7,
        "min_p": 0.1, "presence_penalty": 1, "frequency_penalty": -1.5, "repetition_penalty": 1.2, "seed": -1,
        "max_tokens": 5.0, "min_tokens": 2, "stop": "\n", "stop_token_ids": [1, 2], "ignore_eos": true,
        "logprobs": 3, "skip_special_tokens": false, "echo": true, "stream": true,
        "stream_options": {"include_usage": true}, "user": "u", "best_of": 1})"));
    ASSERT_TRUE(r.has_value()) << r.status().message();
    const SamplingParams& p = r->params;
    EXPECT_EQ(p.temperature, 0.0f);
    EXPECT_EQ(p.top_p, 0.5f);
    EXPECT_EQ(p.top_k, 7);
    EXPECT_FLOAT_EQ(p.min_p, 0.1f);
    EXPECT_EQ(p.presence_penalty, 1.0f);
    EXPECT_EQ(p.frequency_penalty, -1.5f);
    EXPECT_FLOAT_EQ(p.repetition_penalty, 1.2f);
    ASSERT_TRUE(p.seed.has_value());
    EXPECT_EQ(*p.seed, ~uint64_t{0});  // -1 keeps its bits
    EXPECT_EQ(p.max_tokens, 5);        // an integral float is an integer
    EXPECT_EQ(p.min_tokens, 2);
    EXPECT_EQ(p.stop, (std::vector<std::string>{"\n"}));
    EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{1, 2}));
    EXPECT_TRUE(p.ignore_eos);
    EXPECT_EQ(p.logprobs, 3);
    EXPECT_FALSE(p.skip_special_tokens);
    EXPECT_TRUE(r->echo);
    EXPECT_TRUE(r->stream);
    EXPECT_TRUE(r->include_usage);
    EXPECT_TRUE(r->ignored.empty());
}

TEST(ServerProtocol, UnknownFieldsAreListedNotRefused) {
    auto r = parse_completion_request(body(R"({"prompt": "x", "frobnicate": 1, "temperature": null})"));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->ignored, (std::vector<std::string>{"frobnicate"}));
    EXPECT_EQ(r->params.temperature, 1.0f);  // null keeps the default
}

TEST(ServerProtocol, CompletionWrongTypes) {
    completion_refused(R"({})", "prompt", "required");
    completion_refused(R"({"prompt": 5})", "prompt", "got number 5");
    completion_refused(R"({"prompt": []})", "prompt", "empty");
    completion_refused(R"({"prompt": [1, -2]})", "prompt", "prompt[1]");
    completion_refused(R"({"prompt": [[1], ["a"]]})", "prompt", "prompt[1][0]");
    completion_refused(R"({"prompt": ["a", 3]})", "prompt", "prompt[1]");
    completion_refused(R"({"prompt": "x", "temperature": "hot"})", "temperature", "must be a number, got string \"hot\"");
    completion_refused(R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens", "must be an integer");
    completion_refused(R"({"prompt": "x", "max_tokens": "10"})", "max_tokens", "must be an integer");
    completion_refused(R"({"prompt": "x", "n": true})", "n", "boolean");
    completion_refused(R"({"prompt": "x", "stream": "yes"})", "stream", "must be a boolean");
    completion_refused(R"({"prompt": "x", "stop": 3})", "stop", "string or a list of strings");
    completion_refused(R"({"prompt": "x", "stop": ["a", 1]})", "stop", "stop[1]");
    completion_refused(R"({"prompt": "x", "stop_token_ids": [1.5]})", "stop_token_ids", "stop_token_ids[0]");
    completion_refused(R"({"prompt": "x", "logprobs": 21})", "logprobs", "[0, 20]");
    completion_refused(R"({"prompt": "x", "logprobs": true})", "logprobs", "integer");
    completion_refused(R"({"prompt": "x", "seed": "7"})", "seed", "integer");
    completion_refused(R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options", "stream is true");
    completion_refused(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
                       "stream_options.include_usage", "boolean");
    completion_refused(R"({"prompt": "x", "model": 3})", "model", "string");
    completion_refused(R"({"prompt": "x", "temperature": 1e300})", "temperature", "finite");
}

TEST(ServerProtocol, CompletionUnsupportedOptionsAreRefused) {
    completion_refused(R"({"prompt": "x", "suffix": "end"})", "suffix", "not supported");
    completion_refused(R"({"prompt": "x", "best_of": 3})", "best_of", "equal n");
    completion_refused(R"({"prompt": "x", "logit_bias": {"5": 10}})", "logit_bias", "not supported");
    EXPECT_TRUE(parse_completion_request(body(R"({"prompt": "x", "logit_bias": {}})")).has_value());
}

TEST(ServerProtocol, ChatThinkingSwitches) {
    auto def = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "hi"}]})"));
    ASSERT_TRUE(def.has_value());
    EXPECT_EQ(def->render.thinking_mode, tokenizer::ThinkingMode::kThinking);  // vLLM's V4.1 default
    EXPECT_FALSE(def->max_tokens_given);

    auto off = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "hi"}],
        "chat_template_kwargs": {"thinking": false}})"));
    ASSERT_TRUE(off.has_value());
    EXPECT_EQ(off->render.thinking_mode, tokenizer::ThinkingMode::kChat);

    auto none = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "none"})"));
    ASSERT_TRUE(none.has_value());
    EXPECT_EQ(none->render.thinking_mode, tokenizer::ThinkingMode::kChat);

    auto max = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "hi"}],
        "chat_template_kwargs": {"thinking": true, "reasoning_effort": "max"}})"));
    ASSERT_TRUE(max.has_value());
    EXPECT_EQ(max->render.thinking_mode, tokenizer::ThinkingMode::kThinking);
    EXPECT_EQ(max->render.reasoning_effort, 100);

    auto effort = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "low"})"));
    ASSERT_TRUE(effort.has_value());
    EXPECT_EQ(effort->render.reasoning_effort, 50);
}

TEST(ServerProtocol, ChatFields) {
    auto r = parse_chat_request(body(R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 4, "n": 3})"));
    ASSERT_TRUE(r.has_value()) << r.status().message();
    EXPECT_EQ(r->messages.size(), 2u);
    EXPECT_EQ(r->params.max_tokens, 9);
    EXPECT_TRUE(r->max_tokens_given);
    EXPECT_EQ(r->params.logprobs, 4);
    EXPECT_EQ(r->params.n, 3);

    auto lp = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "u"}], "logprobs": true})"));
    ASSERT_TRUE(lp.has_value());
    EXPECT_EQ(lp->params.logprobs, 0);  // the sampled token's logprob only

    auto cont = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "u"},
        {"role": "assistant", "content": "The answer"}], "continue_final_message": true, "add_generation_prompt": false})"));
    ASSERT_TRUE(cont.has_value()) << cont.status().message();
    EXPECT_TRUE(cont->messages.back().without_eos);

    auto tools = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "u"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "tool_choice": "none"})"));
    ASSERT_TRUE(tools.has_value());
    EXPECT_FALSE(tools->render.tools_json.empty());
}

TEST(ServerProtocol, ChatWrongInput) {
    chat_refused(R"({})", "messages", "required");
    chat_refused(R"({"messages": []})", "messages", "empty");
    chat_refused(R"({"messages": "hi"})", "messages", "list");
    chat_refused(R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages", "messages[0]");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "top_logprobs": 2})", "top_logprobs", "logprobs to be true");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "logprobs": 1})", "logprobs", "boolean");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "chat_template_kwargs": {"thinking": "yes"}})",
                 "chat_template_kwargs.thinking", "boolean");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "reasoning_effort": "extreme"})", "reasoning_effort",
                 "low, high, max");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "max_completion_tokens": "8"})",
                 "max_completion_tokens", "integer");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "tools": [{"type": "function", "function": {"name": "f"}}]})",
                 "tool_choice", "not supported");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "response_format": {"type": "json_object"}})",
                 "response_format.type", "not supported");
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}], "continue_final_message": true, "add_generation_prompt": false})",
                 "continue_final_message", "assistant");
    // the text model only: an image part is refused, not turned into an image token with no image behind it
    chat_refused(R"({"messages": [{"role": "user", "content": "u"}, {"role": "user", "content": [{"type": "text",
        "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})",
                 "messages", "messages[1].content[1] is an image part");
    chat_refused(R"({"messages": [{"role": "user", "content": [{"type": "input_image"}]}]})", "messages",
                 "vision encoder is not loaded");
}

TEST(ServerProtocol, StatusMapping) {
    EXPECT_EQ(leading_param("top_p must be in (0, 1], got 0"), "top_p");
    EXPECT_EQ(leading_param("prompt: 10 tokens"), "prompt");
    EXPECT_EQ(leading_param("stop[2] must not be empty"), "stop");
    EXPECT_EQ(leading_param("The model"), "");
    EXPECT_EQ(from_status(error(StatusCode::kResourceExhausted, "queue full")).status, 429);
    EXPECT_EQ(from_status(error(StatusCode::kInternal, "boom")).status, 500);
    Json j = error_json(bad_request("max_tokens must be >= 1, got -1", "max_tokens"));
    EXPECT_EQ(j["error"]["param"], "max_tokens");
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(j["error"]["code"].is_null());
}

TEST(ServerProtocol, JsonNestingDepthSkipsStringsAndStopsPastTheLimit) {
    EXPECT_EQ(json_nesting_depth(R"({"a": 1})", 8), 1);
    EXPECT_EQ(json_nesting_depth(R"({"messages": [{"content": [{"type": "text"}]}]})", 8), 5);
    EXPECT_EQ(json_nesting_depth(R"({"prompt": "[[[[{{{{", "stop": ["]"]})", 8), 2);  // brackets in strings
    EXPECT_EQ(json_nesting_depth(R"({"p": "a \" [[[[ \\", "q": [[1]]})", 8), 3);  // escaped quote, backslash
    EXPECT_EQ(json_nesting_depth("[[[]][[[]]]]", 8), 4);
    EXPECT_EQ(json_nesting_depth(std::string(8, '['), 8), 8);
    EXPECT_EQ(json_nesting_depth(std::string(9, '['), 8), 9);
    EXPECT_EQ(json_nesting_depth(std::string(1000000, '['), 8), 9);  // stops at the limit
    EXPECT_EQ(json_nesting_depth("", 8), 0);
    EXPECT_EQ(json_nesting_depth("]]]", 8), 0);
}

TEST(ServerMetrics, HistogramIsCumulative) {
    Histogram h({0.1, 1.0});
    h.observe(0.05);
    h.observe(0.1);  // le is inclusive
    h.observe(0.5);
    h.observe(7.0);
    std::string out;
    h.render("x_seconds", "help", &out);
    EXPECT_NE(out.find("x_seconds_bucket{le=\"0.1\"} 2\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_seconds_count 4\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_seconds_sum 7.65\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace deepinfer::server
