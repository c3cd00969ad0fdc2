// Server-side metrics and their Prometheus text form (/metrics). Latency histograms are observed from the
// engine's output events (on the engine thread, when each token is emitted); gauges and token counters come
// from Engine::metrics() at scrape time.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::server {

// A cumulative Prometheus histogram with fixed upper bounds (seconds).
class Histogram {
   public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double value);
    // Appends the _bucket / _sum / _count lines of `name`.
    void render(const std::string& name, const std::string& help, std::string* out) const;
    uint64_t count() const;

   private:
    mutable std::mutex mutex_;
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // per bound, not cumulative; last = +Inf
    double sum_ = 0.0;
    uint64_t count_ = 0;
};

class ServerMetrics {
   public:
    ServerMetrics();

    Histogram ttft;          // arrival -> first token
    Histogram tpot;          // between successive tokens of one choice (inter-token latency)
    Histogram e2e;           // arrival -> last event of the HTTP request
    std::atomic<int64_t> in_flight{0};  // HTTP generation requests being served

    void count_response(int status);
    void count_finished(const std::string& finish_reason);

    // The whole exposition: engine gauges and counters, then the server's own series.
    std::string render(const EngineMetrics& engine, const std::string& model_name) const;

   private:
    mutable std::mutex mutex_;
    std::map<int, uint64_t> responses_;               // by HTTP status
    std::map<std::string, uint64_t> finished_;        // by finish reason
};

}  // namespace deepinfer::server
