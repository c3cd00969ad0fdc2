// POST /v1/completions: prompts as text or token ids (a list gives n choices per prompt, choice index =
// prompt * n + k), echo (with prompt logprobs when logprobs is set), streaming with SSE and usage.
#include <fmt/format.h>

#include <map>

#include "core/log.h"
#include "model/config.h"
#include "sample/validate.h"
#include "server/logprobs_json.h"
#include "server/protocol.h"
#include "server/request_group.h"
#include "server/routes.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {
namespace {

struct PreparedPrompt {
    std::vector<int32_t> ids;
    std::string text;                              // for echo
    std::vector<std::optional<TokenLogprob>> logprobs;  // echo + logprobs: one per prompt token, first null
};

struct ChoiceAcc {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::string finish_reason;
    int64_t completion_tokens = 0;
};

// Prompt logprobs by teacher forcing: the prompt's first token as the prompt and the rest forced, so each
// step reports the logprob of the next prompt token (raw logits, as vLLM's prompt_logprobs). Costs one
// decode step per prompt token.
Status score_prompts(HandlerContext& ctx, const std::string& id, int k, std::vector<PreparedPrompt>* prompts) {
    RequestGroup group(ctx.engine, ctx.metrics, ctx.active);
    std::vector<GenerationRequest> requests;
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < prompts->size(); ++i) {
        PreparedPrompt& p = (*prompts)[i];
        p.logprobs.assign(1, std::nullopt);
        if (p.ids.size() < 2) continue;
        GenerationRequest r;
        r.id = fmt::format("{}-score-{}", id, i);
        r.prompt = {p.ids[0]};
        r.forced_output.assign(p.ids.begin() + 1, p.ids.end());
        r.params.temperature = 0.0f;
        r.params.max_tokens = static_cast<int>(r.forced_output.size());
        r.params.ignore_eos = true;
        r.params.logprobs = k;
        index_of[r.id] = i;
        requests.push_back(std::move(r));
    }
    if (requests.empty()) return Status::ok();
    DI_RETURN_IF_ERROR(group.submit(std::move(requests)));
    while (!group.finished()) {
        for (auto& ev : group.wait(std::chrono::milliseconds(1000))) {
            if (ev.finished && ev.finish_reason == "abort")
                return error(StatusCode::kCancelled, "prompt scoring was aborted (server shutting down)");
            auto& lps = (*prompts)[index_of[ev.request_id]].logprobs;
            for (auto& lp : ev.logprobs) lps.emplace_back(std::move(lp));
        }
    }
    return Status::ok();
}

// The request after parsing, tokenization and checks, ready to generate.
struct Completion {
    std::string id;
    int64_t created = 0;
    std::string model;
    CompletionRequest req;
    std::vector<PreparedPrompt> prompts;
    bool generate = true;  // false for echo with max_tokens 0
    int n = 1;
};

Json echo_logprobs(const tokenizer::Tokenizer& tok, const PreparedPrompt& p, CompletionLogprobs* acc) {
    for (size_t t = 0; t < p.ids.size(); ++t) acc->append(p.ids[t], t < p.logprobs.size() ? p.logprobs[t] : std::nullopt);
    return acc->to_json();
}

Reply complete_blocking(HandlerContext& ctx, Completion& c, RequestGroup* group) {
    const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
    const size_t n_choices = c.prompts.size() * static_cast<size_t>(c.n);
    std::vector<ChoiceAcc> acc(n_choices);
    std::map<std::string, size_t> prompt_of;
    int64_t cached = 0;
    for (size_t i = 0; i < c.prompts.size(); ++i) prompt_of[fmt::format("{}-{}", c.id, i)] = i;
    while (group && !group->finished()) {
        for (auto& ev : group->wait(std::chrono::milliseconds(1000))) {
            ChoiceAcc& a = acc[prompt_of[ev.request_id] * static_cast<size_t>(c.n) + static_cast<size_t>(ev.index)];
            a.text += ev.text;
            a.logprobs.insert(a.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
            a.completion_tokens = std::max(a.completion_tokens, ev.completion_tokens);
            if (ev.index == 0) cached = std::max(cached, ev.cached_prompt_tokens);
            if (ev.finished) a.finish_reason = ev.finish_reason;
        }
    }
    Json choices = Json::array();
    int64_t prompt_tokens = 0, completion_tokens = 0;
    for (size_t i = 0; i < c.prompts.size(); ++i) {
        const PreparedPrompt& p = c.prompts[i];
        prompt_tokens += static_cast<int64_t>(p.ids.size());
        for (int k = 0; k < c.n; ++k) {
            ChoiceAcc& a = acc[i * static_cast<size_t>(c.n) + static_cast<size_t>(k)];
            completion_tokens += a.completion_tokens;
            Json choice = {{"index", i * static_cast<size_t>(c.n) + static_cast<size_t>(k)},
                           {"text", c.req.echo ? p.text + a.text : a.text},
                           {"logprobs", nullptr},
                           {"finish_reason", c.generate ? Json(a.finish_reason) : Json("length")}};
            if (c.req.params.logprobs >= 0) {
                CompletionLogprobs lps(tok);
                if (c.req.echo) echo_logprobs(tok, p, &lps);
                lps.append_all(a.logprobs);
                choice["logprobs"] = lps.to_json();
            }
            choices.push_back(std::move(choice));
        }
    }
    Json out = {{"id", c.id},          {"object", "text_completion"}, {"created", c.created},
                {"model", c.model},    {"choices", std::move(choices)},
                {"usage", usage_json(prompt_tokens, completion_tokens, cached)}};
    return json_reply(200, out);
}

// State of one streamed completion, owned by the stream function.
struct CompletionStream {
    HandlerContext ctx;
    Completion c;
    std::unique_ptr<RequestGroup> group;

    void run(const StreamWriter& write) {
        const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
        std::map<std::string, size_t> prompt_of;
        for (size_t i = 0; i < c.prompts.size(); ++i) prompt_of[fmt::format("{}-{}", c.id, i)] = i;
        const size_t n_choices = c.prompts.size() * static_cast<size_t>(c.n);
        std::vector<size_t> offsets(n_choices, 0);        // text_offset of the next token, per choice
        std::vector<int64_t> completion_tokens(n_choices, 0);
        int64_t cached = 0;
        auto chunk = [&](size_t index, const std::string& text, Json logprobs, Json finish_reason) {
            Json ch = {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish_reason)}};
            Json j = {{"id", c.id}, {"object", "text_completion"}, {"created", c.created}, {"model", c.model},
                      {"choices", Json::array({std::move(ch)})}};
            if (c.req.include_usage) j["usage"] = nullptr;
            return write(sse_event(j));
        };
        if (c.req.echo) {
            for (size_t i = 0; i < c.prompts.size(); ++i) {
                for (int k = 0; k < c.n; ++k) {
                    const size_t index = i * static_cast<size_t>(c.n) + static_cast<size_t>(k);
                    Json lp = nullptr;
                    if (c.req.params.logprobs >= 0) {
                        CompletionLogprobs acc(tok);
                        lp = echo_logprobs(tok, c.prompts[i], &acc);
                        offsets[index] = acc.text_offset();
                    } else {
                        offsets[index] = c.prompts[i].text.size();
                    }
                    if (!chunk(index, c.prompts[i].text, std::move(lp), c.generate ? Json(nullptr) : Json("length"))) return;
                }
            }
        }
        while (group && !group->finished()) {
            std::vector<GenerationOutput> events = group->wait(std::chrono::milliseconds(1000));
            if (events.empty() && !write(": keep-alive\n\n")) return;  // an idle stream still notices a gone client
            for (auto& ev : events) {
                const size_t index = prompt_of[ev.request_id] * static_cast<size_t>(c.n) + static_cast<size_t>(ev.index);
                completion_tokens[index] = std::max(completion_tokens[index], ev.completion_tokens);
                if (ev.index == 0) cached = std::max(cached, ev.cached_prompt_tokens);
                const bool want_lp = c.req.params.logprobs >= 0;
                if (ev.text.empty() && !ev.finished && (!want_lp || ev.logprobs.empty())) continue;
                Json lp = nullptr;
                if (want_lp) {
                    CompletionLogprobs acc(tok, offsets[index]);
                    acc.append_all(ev.logprobs);
                    offsets[index] = acc.text_offset();
                    lp = acc.to_json();
                }
                if (!chunk(index, ev.text, std::move(lp), ev.finished ? Json(ev.finish_reason) : Json(nullptr))) return;
            }
        }
        if (c.req.include_usage) {
            int64_t prompt_tokens = 0, generated = 0;
            for (const auto& p : c.prompts) prompt_tokens += static_cast<int64_t>(p.ids.size());
            for (int64_t t : completion_tokens) generated += t;
            Json j = {{"id", c.id}, {"object", "text_completion"}, {"created", c.created}, {"model", c.model},
                      {"choices", Json::array()}, {"usage", usage_json(prompt_tokens, generated, cached)}};
            if (!write(sse_event(j))) return;
        }
        write("data: [DONE]\n\n");
    }
};

}  // namespace

Reply handle_completions(HandlerContext& ctx, const Json& body) {
    Expected<CompletionRequest> parsed = parse_completion_request(body);
    if (!parsed) return error_reply(from_status(parsed.status()));
    Completion c;
    c.req = std::move(parsed).value();
    if (auto e = check_model(ctx, c.req.model)) return error_reply(*e);
    if (auto e = check_unknown_fields(ctx, "/v1/completions", c.req.ignored)) return error_reply(*e);
    c.id = new_request_id("cmpl-");
    c.created = unix_time_now();
    c.model = ctx.model_name;
    c.n = c.req.params.n;
    SamplingParams& params = c.req.params;

    // max_tokens 0 is allowed with echo (score the prompt only), as vLLM allows it.
    c.generate = !(c.req.echo && params.max_tokens == 0);
    SamplingParams checked = params;
    if (!c.generate) checked.max_tokens = 1;
    const model::ModelConfig& mc = ctx.engine.model_config();
    if (Status s = sample::validate_sampling_params(checked, mc.vocab_size, kMaxLogprobs); !s.is_ok())
        return error_reply(from_status(s));
    const bool max_tokens_given = has_field(body, "max_tokens");

    const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
    const bool several = c.req.prompts.size() > 1;
    for (size_t i = 0; i < c.req.prompts.size(); ++i) {
        const PromptInput& in = c.req.prompts[i];
        const std::string param = several ? fmt::format("prompt[{}]", i) : "prompt";
        PreparedPrompt p;
        if (in.is_text) {
            Expected<std::vector<int32_t>> ids = tok.encode(in.text);
            if (!ids) return error_reply(bad_request(fmt::format("{}: {}", param, ids.status().message()), "prompt"));
            p.ids = std::move(ids).value();
            p.text = in.text;
        } else {
            p.ids = in.ids;
            for (int32_t t : p.ids)
                if (t >= mc.vocab_size)
                    return error_reply(bad_request(fmt::format("{}: token id {} is outside the vocabulary [0, {})", param, t, mc.vocab_size), "prompt"));
            if (c.req.echo) {
                Expected<std::string> text = tok.decode(p.ids, params.skip_special_tokens);
                if (!text) return error_reply(bad_request(fmt::format("{}: {}", param, text.status().message()), "prompt"));
                p.text = std::move(text).value();
            }
        }
        if (p.ids.empty()) return error_reply(bad_request(param + " must contain at least one token", "prompt"));
        if (auto e = check_context(ctx, static_cast<int64_t>(p.ids.size()), c.generate ? params.max_tokens : 0,
                                   max_tokens_given, param))
            return error_reply(*e);
        c.prompts.push_back(std::move(p));
    }

    if (c.req.echo && params.logprobs >= 0) {
        if (Status s = score_prompts(ctx, c.id, params.logprobs, &c.prompts); !s.is_ok()) return error_reply(from_status(s));
    }

    std::unique_ptr<RequestGroup> group;
    if (c.generate) {
        group = std::make_unique<RequestGroup>(ctx.engine, ctx.metrics, ctx.active);
        std::vector<GenerationRequest> requests;
        for (size_t i = 0; i < c.prompts.size(); ++i) {
            GenerationRequest r;
            r.id = fmt::format("{}-{}", c.id, i);
            r.prompt = c.prompts[i].ids;
            r.params = params;
            // An omitted max_tokens (default 16) is clamped to the room the context leaves.
            if (!max_tokens_given)
                r.params.max_tokens = static_cast<int>(std::min<int64_t>(params.max_tokens, ctx.engine.max_model_len() - static_cast<int64_t>(r.prompt.size())));
            requests.push_back(std::move(r));
        }
        if (Status s = group->submit(std::move(requests)); !s.is_ok()) return error_reply(from_status(s));
    }
    if (!c.req.stream) return complete_blocking(ctx, c, group.get());

    auto state = std::make_shared<CompletionStream>(CompletionStream{ctx, std::move(c), std::move(group)});
    Reply reply;
    reply.content_type = "text/event-stream";
    reply.stream = [state](const StreamWriter& write) { state->run(write); };
    return reply;
}

}  // namespace deepinfer::server
