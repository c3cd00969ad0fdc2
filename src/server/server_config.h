// Configuration of the OpenAI-compatible HTTP server (`deepinfer serve`).
#pragma once

#include <cstddef>
#include <string>

namespace deepinfer::server {

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8000;                          // 0: any free port (logged, and returned by Server::bind)
    std::string served_model_name;            // empty: the engine's model name
    std::string api_key;                      // empty: no authentication; else "Authorization: Bearer <key>" on /v1
    int max_concurrent = 256;                 // generation requests served at once; more are refused with 429
    size_t max_body_bytes = size_t{64} << 20; // larger bodies are refused with 413
    int keep_alive_seconds = 5;               // idle keep-alive connections are closed after this
    bool allow_unknown_fields = false;        // false: a request with an unknown field gets 400 (as OpenAI's API
                                              // answers); true: logged and ignored (vLLM's default)
};

}  // namespace deepinfer::server
