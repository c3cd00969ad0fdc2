// The OpenAI routes as functions from a parsed body to a Reply, independent of the HTTP library: a status and
// JSON body, or a stream function that writes SSE events until the response is complete. http_server.cpp maps
// a Reply onto the wire.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "deepinfer/engine.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/request_group.h"

namespace deepinfer::server {

// Writes bytes to the client; false when the client has gone away.
using StreamWriter = std::function<bool(std::string_view)>;

struct Reply {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    // Set for streaming replies (text/event-stream): runs once, writes every event, returns when done.
    std::function<void(const StreamWriter& write)> stream;
};

struct HandlerContext {
    Engine& engine;
    ServerMetrics& metrics;
    ActiveRequests& active;
    std::string model_name;  // served name
    bool allow_unknown_fields = false;  // ServerConfig::allow_unknown_fields
};

Reply json_reply(int status, const Json& body);
Reply error_reply(const ApiError& e);

// POST /v1/completions and POST /v1/chat/completions.
Reply handle_completions(HandlerContext& ctx, const Json& body);
Reply handle_chat_completions(HandlerContext& ctx, const Json& body);

// --- shared by the two routes ---

// JSON text of a response or event; invalid UTF-8 never reaches the client (replaced by U+FFFD).
std::string dump_json(const Json& j);
std::string sse_event(const Json& j);

// OpenAI "usage"; prompt_tokens_details.cached_tokens when the prefix cache served part of the prompt.
Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// The requested model is the served one (an empty name means the served model, as vLLM allows).
std::optional<ApiError> check_model(const HandlerContext& ctx, const std::string& requested);

// Prompt of `prompt_len` tokens with `max_tokens` to generate must fit the context; the message names both.
std::optional<ApiError> check_context(const HandlerContext& ctx, int64_t prompt_len, int64_t max_tokens,
                                      bool max_tokens_given, const std::string& prompt_param);

// Unknown request fields: a 400 naming the first ("Unrecognized request argument supplied: ...", as OpenAI's
// API answers), or, with allow_unknown_fields, a warning in the log and nothing else (vLLM's behaviour).
std::optional<ApiError> check_unknown_fields(const HandlerContext& ctx, const std::string& route,
                                             const std::vector<std::string>& fields);

int64_t unix_time_now();

}  // namespace deepinfer::server
