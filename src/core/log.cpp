// Leveled logging to stderr, one line per message, safe to call from several threads.
#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "core/env.h"

namespace deepinfer::log {
namespace {
std::atomic<int> g_level{[] {
    Level parsed = Level::kInfo;
    parse_level(env::log_level(), &parsed);
    return static_cast<int>(parsed);
}()};
std::mutex g_mutex;
}  // namespace

void set_level(Level l) { g_level.store(static_cast<int>(l)); }
Level level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

bool parse_level(std::string_view name, Level* out) {
    if (name == "debug") *out = Level::kDebug;
    else if (name == "info") *out = Level::kInfo;
    else if (name == "warn" || name == "warning") *out = Level::kWarn;
    else if (name == "error") *out = Level::kError;
    else if (name == "off") *out = Level::kOff;
    else return false;
    return true;
}

void write(Level l, std::string_view message) {
    static const char* kNames[] = {"debug", "info", "warn", "error", "off"};
    using Clock = std::chrono::steady_clock;
    static const Clock::time_point start = Clock::now();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::lock_guard<std::mutex> lock(g_mutex);
    std::fprintf(stderr, "[%8.3f %s] %.*s\n", seconds, kNames[static_cast<int>(l)], static_cast<int>(message.size()),
                 message.data());
}

}  // namespace deepinfer::log
