// Server: cpp-httplib wiring of the routes (routes.h), with only APIs present in cpp-httplib 0.11.4 and later
// releases (docs/toolchain-notes.md): per-server thread pool via new_task_queue, chunked content providers for
// SSE, bind_to_port / bind_to_any_port + listen_after_bind.
#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>

#include "core/log.h"
#include "server/metrics.h"
#include "server/routes.h"
#include "tokenizer/utf8.h"

namespace deepinfer::server {
namespace {

using Clock = std::chrono::steady_clock;

// Holds one of max_concurrent generation slots; released when the last copy goes (a stream keeps it).
struct InFlightSlot {
    explicit InFlightSlot(std::atomic<int64_t>& counter) : counter_(counter) {}
    ~InFlightSlot() { --counter_; }
    std::atomic<int64_t>& counter_;
};

// Key comparison whose time does not depend on where the first difference is (only on the lengths).
bool constant_time_equal(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

// The parsed body of a POST, or the 400 that explains why there is none.
std::variant<Json, ApiError> parse_body(const std::string& body) {
    if (!tokenizer::is_valid_utf8(body)) {
        size_t pos = 0;
        while (pos < body.size()) {
            bool complete = false;
            size_t len = tokenizer::utf8_sequence_prefix(body, pos, &complete);
            if (len == 0 || !complete) break;
            pos += len;
        }
        return bad_request(fmt::format("request body is not valid UTF-8 (first bad byte at offset {})", pos), "",
                           "invalid_utf8");
    }
    if (json_nesting_depth(body, kMaxJsonDepth) > kMaxJsonDepth)
        return bad_request(fmt::format("request body nests arrays / objects more than {} levels deep", kMaxJsonDepth),
                           "", "invalid_json");
    try {
        Json j = Json::parse(body);
        if (!j.is_object()) return bad_request(fmt::format("request body must be a JSON object, got {}", describe_json(j)));
        return j;
    } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past double (1e400)
        std::string what = e.what();
        const size_t cut = what.find("] ");
        if (cut != std::string::npos) what = what.substr(cut + 2);
        return bad_request("request body is not valid JSON: " + what, "", "invalid_json");
    }
}

}  // namespace

struct Server::Impl {
    Engine& engine;
    ServerConfig config;
    ServerMetrics metrics;
    ActiveRequests active;
    HandlerContext ctx;
    httplib::Server http;
    std::atomic<bool> draining{false};

    Impl(Engine& e, ServerConfig c)
        : engine(e), config(std::move(c)), ctx{e, metrics, active, config.served_model_name.empty() ? e.model_name() : config.served_model_name,
              config.allow_unknown_fields} {}

    void send(httplib::Response& res, const Reply& reply) {
        res.status = reply.status;
        res.set_content(reply.body, reply.content_type.c_str());
    }
    void send_error(httplib::Response& res, const ApiError& e) { send(res, error_reply(e)); }

    bool authorized(const httplib::Request& req) const {
        if (config.api_key.empty()) return true;
        const std::string header = req.get_header_value("Authorization");
        const std::string prefix = "Bearer ";
        return header.compare(0, prefix.size(), prefix) == 0 && constant_time_equal(header.substr(prefix.size()), config.api_key);
    }

    // Common path of the two generation routes.
    void generate(const httplib::Request& req, httplib::Response& res, Reply (*route)(HandlerContext&, const Json&)) {
        const auto start = Clock::now();
        if (draining) {
            ApiError e;
            e.status = 503;
            e.type = "service_unavailable_error";
            e.message = "the server is shutting down and accepts no new requests";
            return send_error(res, e);
        }
        if (!authorized(req)) {
            ApiError e;
            e.status = 401;
            e.type = "authentication_error";
            e.code = "invalid_api_key";
            e.message = "missing or wrong API key: send \"Authorization: Bearer <key>\"";
            return send_error(res, e);
        }
        auto body = parse_body(req.body);
        if (auto* e = std::get_if<ApiError>(&body)) return send_error(res, *e);
        if (metrics.in_flight.fetch_add(1) >= config.max_concurrent) {
            --metrics.in_flight;
            ApiError e;
            e.status = 429;
            e.type = "rate_limit_error";
            e.code = "too_many_requests";
            e.message = fmt::format("the server is serving its maximum of {} concurrent requests (--max-concurrent); retry later",
                                    config.max_concurrent);
            return send_error(res, e);
        }
        auto slot = std::make_shared<InFlightSlot>(metrics.in_flight);
        Reply reply;
        try {
            reply = route(ctx, std::get<Json>(body));
        } catch (const std::exception& ex) {
            log::error("{} {}: internal error: {}", req.method, req.path, ex.what());
            ApiError e;
            e.status = 500;
            e.type = "internal_error";
            e.message = fmt::format("internal error: {}", ex.what());
            reply = error_reply(e);
        }
        if (!reply.stream) {
            if (reply.status == 200) metrics.e2e.observe(std::chrono::duration<double>(Clock::now() - start).count());
            return send(res, reply);
        }
        res.status = 200;
        res.set_header("Cache-Control", "no-cache");
        auto stream = std::make_shared<std::function<void(const StreamWriter&)>>(std::move(reply.stream));
        ServerMetrics* m = &metrics;
        res.set_chunked_content_provider(
            reply.content_type.c_str(), [stream, slot, m, start](size_t, httplib::DataSink& sink) {
                bool ok = true;
                (*stream)([&](std::string_view data) {
                    ok = ok && sink.write(data.data(), data.size());
                    return ok;
                });
                if (!ok) return false;  // the client went away; destroying the stream aborts its requests
                m->e2e.observe(std::chrono::duration<double>(Clock::now() - start).count());
                sink.done();
                return true;
            });
    }

    void models(const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req)) {
            ApiError e;
            e.status = 401;
            e.type = "authentication_error";
            e.code = "invalid_api_key";
            e.message = "missing or wrong API key: send \"Authorization: Bearer <key>\"";
            return send_error(res, e);
        }
        Json model = {{"id", ctx.model_name},   {"object", "model"},          {"created", unix_time_now()},
                      {"owned_by", "deepinfer"}, {"root", engine.model_name()}, {"parent", nullptr},
                      {"max_model_len", engine.max_model_len()}};
        send(res, json_reply(200, Json{{"object", "list"}, {"data", Json::array({model})}}));
    }

    void install_routes() {
        http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, handle_completions); });
        http.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, handle_chat_completions); });
        http.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& r) { models(q, r); });
        http.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
            r.status = draining ? 503 : 200;
        });
        http.Get("/version", [this](const httplib::Request&, httplib::Response& r) {
            send(r, json_reply(200, Json{{"version", "0.1.0"}}));
        });
        http.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
            r.set_content(metrics.render(engine.metrics(), ctx.model_name), "text/plain; version=0.0.4; charset=utf-8");
        });
        // Statuses the library sets itself (404 unknown route, 413 body too large, 400 bad HTTP) get JSON too.
        http.set_error_handler(httplib::Server::HandlerWithResponse(
            [this](const httplib::Request& req, httplib::Response& res) {
                if (!res.body.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
                ApiError e;
                e.status = res.status;
                if (res.status == 404) {
                    e = not_found(fmt::format("no route for {} {}", req.method, req.path), "route_not_found");
                } else if (res.status == 413) {
                    e.message = fmt::format("request body larger than {} bytes", config.max_body_bytes);
                } else {
                    e.message = fmt::format("HTTP error {}", res.status);
                }
                send_error(res, e);
                res.status = e.status;
                return httplib::Server::HandlerResponse::Handled;
            }));
        http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
            metrics.count_response(res.status);
            if (res.status >= 400) log::info("{} {} -> {} {}", req.method, req.path, res.status, res.body.substr(0, 300));
            else log::debug("{} {} -> {}", req.method, req.path, res.status);
        });
    }
};

Server::Server(Engine& engine, ServerConfig config) : impl_(std::make_unique<Impl>(engine, std::move(config))) {
    Impl& m = *impl_;
    const size_t threads = static_cast<size_t>(std::max(1, m.config.max_concurrent)) + 16;
    // Each open connection holds a worker while it lives; the margin keeps /health and /metrics answering
    // and lets requests past max_concurrent be refused with 429 instead of queueing.
    m.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    m.http.set_payload_max_length(m.config.max_body_bytes);
    m.http.set_keep_alive_timeout(m.config.keep_alive_seconds);
    m.http.set_read_timeout(60, 0);
    m.http.set_write_timeout(60, 0);
    m.install_routes();
}

Server::~Server() { shutdown(); }

Expected<int> Server::bind() {
    Impl& m = *impl_;
    if (m.config.port == 0) {
        int port = m.http.bind_to_any_port(m.config.host);
        if (port < 0) return error(StatusCode::kIoError, "cannot listen on {} (any port)", m.config.host);
        return port;
    }
    if (!m.http.bind_to_port(m.config.host, m.config.port))
        return error(StatusCode::kIoError, "cannot listen on {}:{} (address in use, or not a local address?)",
                     m.config.host, m.config.port);
    return m.config.port;
}

Status Server::run() {
    Impl& m = *impl_;
    m.engine.start();
    const bool ok = m.http.listen_after_bind();
    // listen_after_bind returns after stop() once every worker has finished its connection.
    m.engine.stop(true);
    if (!ok && !m.draining) return error(StatusCode::kIoError, "the HTTP server stopped unexpectedly");
    return Status::ok();
}

void Server::shutdown() {
    Impl& m = *impl_;
    m.draining = true;
    m.http.stop();
}

void Server::abort_in_flight() {
    Impl& m = *impl_;
    m.draining = true;
    m.active.abort_all(m.engine);
}

}  // namespace deepinfer::server
