// The OpenAI-compatible HTTP server over one Engine: routes, authentication, admission (429 / 503), SSE
// streaming and graceful shutdown. The HTTP library stays inside http_server.cpp.
#pragma once

#include <memory>

#include "deepinfer/engine.h"
#include "server/server_config.h"

namespace deepinfer::server {

class Server {
   public:
    Server(Engine& engine, ServerConfig config);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds the listening socket; returns the port (the chosen one when config.port is 0).
    Expected<int> bind();
    // Starts the engine loop and serves until shutdown(); returns once every in-flight request has finished
    // and the engine has drained.
    Status run();
    // Stop accepting: the listening socket closes, requests still arriving on open connections get 503,
    // in-flight requests run to completion. Safe to call from any thread, more than once.
    void shutdown();
    // Cancel every in-flight request (a second signal): each ends with finish_reason "abort".
    void abort_in_flight();

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::server
