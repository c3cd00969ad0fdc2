// POST /v1/chat/completions: messages rendered in the DeepSeek-V4.1 prompt format (thinking or chat mode),
// generated text split into reasoning_content and content at </think> (streamed deltas too), n choices,
// logprobs / top_logprobs, SSE streaming with usage.
#include <fmt/format.h>

#include "core/log.h"
#include "model/config.h"
#include "sample/validate.h"
#include "server/logprobs_json.h"
#include "server/protocol.h"
#include "server/reasoning_splitter.h"
#include "server/request_group.h"
#include "server/routes.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {
namespace {

struct Chat {
    std::string id;
    int64_t created = 0;
    std::string model;
    ChatRequest req;
    int64_t prompt_tokens = 0;
    bool starts_in_reasoning = false;
};

Reply chat_blocking(HandlerContext& ctx, Chat& c, RequestGroup& group) {
    const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
    const int n = c.req.params.n;
    std::vector<std::string> texts(n), finish(n);
    std::vector<std::vector<TokenLogprob>> logprobs(n);
    std::vector<int64_t> generated(n, 0);
    int64_t cached = 0;
    while (!group.finished()) {
        for (auto& ev : group.wait(std::chrono::milliseconds(1000))) {
            texts[ev.index] += ev.text;
            logprobs[ev.index].insert(logprobs[ev.index].end(), ev.logprobs.begin(), ev.logprobs.end());
            generated[ev.index] = std::max(generated[ev.index], ev.completion_tokens);
            if (ev.index == 0) cached = std::max(cached, ev.cached_prompt_tokens);
            if (ev.finished) finish[ev.index] = ev.finish_reason;
        }
    }
    Json choices = Json::array();
    int64_t completion_tokens = 0;
    for (int k = 0; k < n; ++k) {
        ReasoningSplitter split(c.starts_in_reasoning);
        SplitDelta a = split.push(texts[k]);
        SplitDelta b = split.finish();
        Json message = {{"role", "assistant"}};
        // vLLM's DeepSeek parser: content is null while the reasoning has not ended.
        const bool ended = !split.in_reasoning();
        message["content"] = ended ? Json(a.content + b.content) : Json(nullptr);
        if (split.had_reasoning()) message["reasoning_content"] = a.reasoning + b.reasoning;
        Json choice = {{"index", k}, {"message", std::move(message)}, {"logprobs", nullptr}, {"finish_reason", finish[k]}};
        if (c.req.params.logprobs >= 0) choice["logprobs"] = Json{{"content", chat_logprob_entries(tok, logprobs[k])}};
        choices.push_back(std::move(choice));
        completion_tokens += generated[k];
    }
    Json out = {{"id", c.id},       {"object", "chat.completion"}, {"created", c.created},
                {"model", c.model}, {"choices", std::move(choices)},
                {"usage", usage_json(c.prompt_tokens, completion_tokens, cached)}};
    return json_reply(200, out);
}

struct ChatStream {
    HandlerContext ctx;
    Chat c;
    std::unique_ptr<RequestGroup> group;

    void run(const StreamWriter& write) {
        const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
        const int n = c.req.params.n;
        std::vector<ReasoningSplitter> splitters(n, ReasoningSplitter(c.starts_in_reasoning));
        std::vector<int64_t> generated(n, 0);
        int64_t cached = 0;
        auto chunk = [&](int index, Json delta, Json logprobs, Json finish_reason) {
            Json ch = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                       {"finish_reason", std::move(finish_reason)}};
            Json j = {{"id", c.id}, {"object", "chat.completion.chunk"}, {"created", c.created}, {"model", c.model},
                      {"choices", Json::array({std::move(ch)})}};
            if (c.req.include_usage) j["usage"] = nullptr;
            return write(sse_event(j));
        };
        // The first delta of each choice carries the role, as OpenAI and vLLM send it.
        for (int k = 0; k < n; ++k)
            if (!chunk(k, Json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)) return;
        while (!group->finished()) {
            std::vector<GenerationOutput> events = group->wait(std::chrono::milliseconds(1000));
            if (events.empty() && !write(": keep-alive\n\n")) return;
            for (auto& ev : events) {
                const int k = ev.index;
                generated[k] = std::max(generated[k], ev.completion_tokens);
                if (k == 0) cached = std::max(cached, ev.cached_prompt_tokens);
                SplitDelta d = splitters[k].push(ev.text);
                if (ev.finished) {
                    SplitDelta rest = splitters[k].finish();
                    d.reasoning += rest.reasoning;
                    d.content += rest.content;
                }
                Json delta = Json::object();
                if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
                if (!d.content.empty()) delta["content"] = d.content;
                const bool want_lp = c.req.params.logprobs >= 0 && !ev.logprobs.empty();
                if (delta.empty() && !ev.finished && !want_lp) continue;
                Json lp = want_lp ? Json{{"content", chat_logprob_entries(tok, ev.logprobs)}} : Json(nullptr);
                if (!chunk(k, std::move(delta), std::move(lp), ev.finished ? Json(ev.finish_reason) : Json(nullptr))) return;
            }
        }
        if (c.req.include_usage) {
            int64_t total = 0;
            for (int64_t g : generated) total += g;
            Json j = {{"id", c.id}, {"object", "chat.completion.chunk"}, {"created", c.created}, {"model", c.model},
                      {"choices", Json::array()}, {"usage", usage_json(c.prompt_tokens, total, cached)}};
            if (!write(sse_event(j))) return;
        }
        write("data: [DONE]\n\n");
    }
};

}  // namespace

Reply handle_chat_completions(HandlerContext& ctx, const Json& body) {
    Expected<ChatRequest> parsed = parse_chat_request(body);
    if (!parsed) return error_reply(from_status(parsed.status()));
    Chat c;
    c.req = std::move(parsed).value();
    if (auto e = check_model(ctx, c.req.model)) return error_reply(*e);
    if (auto e = check_unknown_fields(ctx, "/v1/chat/completions", c.req.ignored)) return error_reply(*e);
    c.id = new_request_id("chatcmpl-");
    c.created = unix_time_now();
    c.model = ctx.model_name;
    SamplingParams& params = c.req.params;

    Expected<std::string> prompt = tokenizer::render_chat(c.req.messages, c.req.render);
    if (!prompt) return error_reply(from_status(prompt.status()));
    c.starts_in_reasoning = tokenizer::prompt_opens_reasoning(*prompt);
    Expected<std::vector<int32_t>> ids = ctx.engine.tokenizer().encode(*prompt);
    if (!ids) return error_reply(bad_request("messages: " + ids.status().message(), "messages"));
    c.prompt_tokens = static_cast<int64_t>(ids->size());

    // Without max_tokens / max_completion_tokens the reply may fill the context (vLLM's default).
    const int64_t room = ctx.engine.max_model_len() - c.prompt_tokens;
    if (!c.req.max_tokens_given && room >= 1) params.max_tokens = static_cast<int>(std::min<int64_t>(room, 1 << 30));
    const std::string max_param = has_field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (Status s = sample::validate_sampling_params(params, ctx.engine.model_config().vocab_size, kMaxLogprobs); !s.is_ok()) {
        ApiError e = from_status(s);
        if (e.param == "max_tokens" && max_param != e.param) {
            e.param = max_param;
            e.message = max_param + e.message.substr(std::string("max_tokens").size());
        }
        return error_reply(e);
    }
    if (auto e = check_context(ctx, c.prompt_tokens, params.max_tokens, c.req.max_tokens_given, "messages")) {
        if (e->param == "max_tokens") e->param = max_param;
        return error_reply(*e);
    }

    auto group = std::make_unique<RequestGroup>(ctx.engine, ctx.metrics, ctx.active);
    GenerationRequest r;
    r.id = c.id;
    r.prompt = std::move(ids).value();
    r.params = params;
    std::vector<GenerationRequest> requests;
    requests.push_back(std::move(r));
    if (Status s = group->submit(std::move(requests)); !s.is_ok()) return error_reply(from_status(s));
    if (!c.req.stream) return chat_blocking(ctx, c, *group);

    auto state = std::make_shared<ChatStream>(ChatStream{ctx, std::move(c), std::move(group)});
    Reply reply;
    reply.content_type = "text/event-stream";
    reply.stream = [state](const StreamWriter& write) { state->run(write); };
    return reply;
}

}  // namespace deepinfer::server
