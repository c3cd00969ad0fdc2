// Histogram and the Prometheus text exposition (format 0.0.4). Metric names follow vLLM's with a deepinfer_
// prefix (Prometheus reserves ':' for recording rules).
#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace deepinfer::server {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    ++counts_[i];
    sum_ += value;
    ++count_;
}

uint64_t Histogram::count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
    }
    cumulative += counts_.back();
    *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name, sum_, name, count_);
}

ServerMetrics::ServerMetrics()
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
            80.0, 160.0, 640.0}),
      tpot({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0}),
      e2e({0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
           480.0, 960.0, 1920.0}) {}

void ServerMetrics::count_response(int status) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++responses_[status];
}

void ServerMetrics::count_finished(const std::string& finish_reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++finished_[finish_reason];
}

namespace {

void gauge(std::string* out, const std::string& name, const std::string& help, double value,
           const std::string& labels = "") {
    *out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{} {}\n", name, help, name, name, labels, value);
}

void counter(std::string* out, const std::string& name, const std::string& help, double value) {
    *out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
}

// A label value in the text format: backslash, double quote and newline escaped.
std::string label_value(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

double ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

}  // namespace

std::string ServerMetrics::render(const EngineMetrics& m, const std::string& model_name) const {
    std::string out;
    const std::string model = fmt::format("{{model_name=\"{}\"}}", label_value(model_name));
    gauge(&out, "deepinfer_num_requests_waiting", "Requests queued in the engine, not yet scheduled.",
          static_cast<double>(m.waiting), model);
    gauge(&out, "deepinfer_num_requests_running", "Sequences scheduled in the engine (one per choice).",
          static_cast<double>(m.running), model);
    gauge(&out, "deepinfer_num_http_requests_in_flight", "Generation HTTP requests being served.",
          static_cast<double>(in_flight.load()), model);
    out += "# HELP deepinfer_kv_cache_usage_ratio Fraction of KV blocks in use, per pool.\n"
           "# TYPE deepinfer_kv_cache_usage_ratio gauge\n";
    out += fmt::format("deepinfer_kv_cache_usage_ratio{{pool=\"compressed\"}} {}\n", ratio(m.kv_blocks_used, m.kv_blocks_total));
    out += fmt::format("deepinfer_kv_cache_usage_ratio{{pool=\"window\"}} {}\n", ratio(m.window_blocks_used, m.window_blocks_total));
    out += "# HELP deepinfer_kv_cache_blocks KV blocks per pool and state.\n# TYPE deepinfer_kv_cache_blocks gauge\n";
    out += fmt::format("deepinfer_kv_cache_blocks{{pool=\"compressed\",state=\"used\"}} {}\n", m.kv_blocks_used);
    out += fmt::format("deepinfer_kv_cache_blocks{{pool=\"compressed\",state=\"total\"}} {}\n", m.kv_blocks_total);
    out += fmt::format("deepinfer_kv_cache_blocks{{pool=\"window\",state=\"used\"}} {}\n", m.window_blocks_used);
    out += fmt::format("deepinfer_kv_cache_blocks{{pool=\"window\",state=\"total\"}} {}\n", m.window_blocks_total);
    counter(&out, "deepinfer_num_preemptions_total", "Sequences preempted (KV blocks reclaimed, recomputed later).",
            static_cast<double>(m.preemptions));
    counter(&out, "deepinfer_prompt_tokens_total", "Prompt tokens computed (prefix-cache hits excluded).",
            static_cast<double>(m.prompt_tokens));
    counter(&out, "deepinfer_generation_tokens_total", "Tokens generated.", static_cast<double>(m.generation_tokens));
    counter(&out, "deepinfer_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            static_cast<double>(m.prefix_query_tokens));
    counter(&out, "deepinfer_prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
            static_cast<double>(m.prefix_hit_tokens));
    gauge(&out, "deepinfer_prefix_cache_hit_rate", "Prefix-cache hits / queries since start (tokens).",
          ratio(m.prefix_hit_tokens, m.prefix_query_tokens));
    counter(&out, "deepinfer_engine_requests_finished_total", "Engine requests finished.",
            static_cast<double>(m.requests_finished));
    counter(&out, "deepinfer_engine_requests_aborted_total", "Engine requests aborted (client gone, shutdown).",
            static_cast<double>(m.requests_aborted));
    ttft.render("deepinfer_time_to_first_token_seconds", "Time from arrival to the first generated token.", &out);
    tpot.render("deepinfer_time_per_output_token_seconds", "Time between successive tokens of one choice.", &out);
    e2e.render("deepinfer_e2e_request_latency_seconds", "Time from arrival to the end of an HTTP generation request.", &out);
    std::lock_guard<std::mutex> lock(mutex_);
    out += "# HELP deepinfer_request_success_total Choices finished, by finish reason.\n"
           "# TYPE deepinfer_request_success_total counter\n";
    for (const char* reason : {"stop", "length", "abort"}) {
        auto it = finished_.find(reason);
        out += fmt::format("deepinfer_request_success_total{{finished_reason=\"{}\"}} {}\n", reason,
                           it == finished_.end() ? 0 : it->second);
    }
    out += "# HELP deepinfer_http_responses_total HTTP responses by status code.\n"
           "# TYPE deepinfer_http_responses_total counter\n";
    for (const auto& [status, n] : responses_)
        out += fmt::format("deepinfer_http_responses_total{{code=\"{}\"}} {}\n", status, n);
    return out;
}

}  // namespace deepinfer::server
