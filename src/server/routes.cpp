// Helpers shared by the OpenAI routes (see routes.h).
#include "server/routes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

#include "core/log.h"

namespace deepinfer::server {

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& j) { return "data: " + dump_json(j) + "\n\n"; }

Reply json_reply(int status, const Json& body) {
    Reply r;
    r.status = status;
    r.body = dump_json(body);
    return r;
}

Reply error_reply(const ApiError& e) { return json_reply(e.status, error_json(e)); }

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached) {
    Json u = {{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
    if (cached > 0) u["prompt_tokens_details"] = Json{{"cached_tokens", cached}};
    return u;
}

std::optional<ApiError> check_model(const HandlerContext& ctx, const std::string& requested) {
    if (requested.empty() || requested == ctx.model_name) return std::nullopt;
    // 404 as OpenAI and vLLM answer an unknown model (openai.NotFoundError in the client).
    ApiError e = not_found(fmt::format("model: \"{}\" does not exist; this server serves \"{}\" (see GET /v1/models)",
                                       requested, ctx.model_name),
                           "model_not_found");
    e.param = "model";
    return e;
}

std::optional<ApiError> check_context(const HandlerContext& ctx, int64_t prompt_len, int64_t max_tokens,
                                      bool max_tokens_given, const std::string& prompt_param) {
    const int64_t limit = ctx.engine.max_model_len();
    if (prompt_len >= limit) {
        const std::string param = prompt_param.substr(0, prompt_param.find('['));
        return bad_request(fmt::format("{}: {} tokens, but this model's maximum context length is {} tokens (the prompt "
                                       "plus at least one generated token must fit)", prompt_param, prompt_len, limit),
                           param, "context_length_exceeded");
    }
    if (max_tokens_given && prompt_len + max_tokens > limit)
        return bad_request(fmt::format("max_tokens: this model's maximum context length is {} tokens, but {} were "
                                       "requested ({} in {} + {} in max_tokens); reduce the prompt or max_tokens",
                                       limit, prompt_len + max_tokens, prompt_len, prompt_param, max_tokens),
                           "max_tokens", "context_length_exceeded");
    return std::nullopt;
}

std::optional<ApiError> check_unknown_fields(const HandlerContext& ctx, const std::string& route,
                                             const std::vector<std::string>& fields) {
    if (fields.empty()) return std::nullopt;
    if (!ctx.allow_unknown_fields)
        return bad_request(fmt::format("Unrecognized request argument supplied: {} (start the server with "
                                       "--allow-unknown-fields to ignore unknown fields)",
                                       fmt::join(fields, ", ")),
                           fields.front(), "unrecognized_argument");
    log::warn("{}: ignoring unknown request fields: {}", route, fmt::join(fields, ", "));
    return std::nullopt;
}

int64_t unix_time_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace deepinfer::server
