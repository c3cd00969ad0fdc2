// `deepinfer serve`: the OpenAI-compatible HTTP server (src/server) over one engine. SIGTERM / SIGINT / SIGUSR2
// drain: stop accepting, finish in-flight requests, exit 0; a second signal cancels what is still running.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "core/log.h"
#include "deepinfer/engine.h"
#include "server/http_server.h"
#include "dist/mpi_comm.h"
#include "tools/commands.h"
#include "tools/mpi_launch.h"

namespace deepinfer::cli {
namespace {

struct Options {
    EngineConfig engine;
    server::ServerConfig server;
};

int run(Options& o, dist::Comm* world) {
    // Signals are taken by one thread with sigwait; every other thread (engine pool, HTTP workers) inherits
    // the blocked mask from here, so none of them is interrupted.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR2);  // mpirun forwards it without killing the job (see make_serve_command)
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);  // a client that closed its socket must not kill the process

    if (o.server.max_concurrent < 1) {
        fmt::print(stderr, "error: --max-concurrent must be >= 1, got {}\n", o.server.max_concurrent);
        return 2;
    }
    auto engine = Engine::create(o.engine, world);
    if (!engine) {
        fmt::print(stderr, "error: {}\n", engine.status().message());
        if (world) dist::abort_mpi(1);  // the other ranks wait for plans that will never come
        return 1;
    }
    server::Server srv(**engine, o.server);
    Expected<int> port = srv.bind();
    if (!port) {
        fmt::print(stderr, "error: {}\n", port.status().message());
        return 1;
    }
    std::atomic<bool> serving_done{false};
    std::thread signal_thread([&srv, &serving_done, signals] {
        int count = 0;
        while (!serving_done.load()) {
            const timespec poll = {0, 100'000'000};
            const int sig = sigtimedwait(&signals, nullptr, &poll);
            if (sig < 0) {
                // Re-issue the stop while draining: one that lands before the listener has started is lost.
                if (count > 0) srv.shutdown();
                continue;
            }
            if (++count == 1) {
                log::info("serve: signal {}: draining (no new requests; in-flight ones finish; signal again to cancel them)", sig);
                srv.shutdown();
            } else {
                log::info("serve: signal {}: cancelling in-flight requests", sig);
                srv.abort_in_flight();
            }
        }
    });
    const std::string name = o.server.served_model_name.empty() ? (*engine)->model_name() : o.server.served_model_name;
    log::info("serve: model \"{}\", max model len {}, listening on http://{}:{}", name, (*engine)->max_model_len(),
              o.server.host, *port);
    Status s = srv.run();
    serving_done = true;
    signal_thread.join();
    if (!s.is_ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 1;
    }
    log::info("serve: drained, exiting");
    return 0;
}

}  // namespace

Command make_serve_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto o = std::make_shared<Options>();
        auto* sub = app.add_subcommand("serve", "Serve the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics)");
        add_engine_options(sub, &o->engine);
        sub->add_option("--host", o->server.host, "Address to listen on");
        sub->add_option("--port", o->server.port, "Port to listen on (0: any free port, logged at start)");
        sub->add_option("--served-model-name", o->server.served_model_name, "Model name clients use (default: the model path, or deepinfer-tiny)");
        sub->add_option("--api-key", o->server.api_key, "Require \"Authorization: Bearer KEY\" on /v1 routes");
        sub->add_option("--max-concurrent", o->server.max_concurrent, "Generation requests served at once; more get 429");
        sub->add_option("--max-waiting", o->engine.max_waiting, "Requests queued for the engine beyond this get 429");
        sub->add_flag("--allow-unknown-fields", o->server.allow_unknown_fields,
                      "Log and ignore unknown request fields (vLLM's behaviour) instead of answering 400 (OpenAI's)");
        sub->callback([o, exit_code] {
            // Under mpirun the launcher forwards signals to every rank. Only rank 0 acts on them (it drains,
            // then ends the followers with its last step plan): block them before MPI starts any thread, so a
            // follower never dies mid-collective; rank 0 takes them with sigwait in run(). mpirun turns
            // SIGTERM / SIGINT into SIGKILL after a few seconds, but forwards SIGUSR2 as it is: send that to
            // mpirun for a drain that lets long requests finish.
            sigset_t stop;
            sigemptyset(&stop);
            sigaddset(&stop, SIGINT);
            sigaddset(&stop, SIGTERM);
            sigaddset(&stop, SIGUSR1);
            sigaddset(&stop, SIGUSR2);
            pthread_sigmask(SIG_BLOCK, &stop, nullptr);
            *exit_code = run_with_ranks(o->engine, [&](dist::Comm* world) { return run(*o, world); });
        });
    }};
}

}  // namespace deepinfer::cli
