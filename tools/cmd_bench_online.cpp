// `deepinfer bench --url`: streaming /v1/completions requests (token-id prompts, greedy, ignore_eos,
// include_usage) against a running OpenAI-compatible server, with Poisson arrivals (--request-rate) and at
// most --concurrency in flight. Works against any server with vLLM's extensions (ignore_eos).
#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <mutex>
#include <random>
#include <semaphore>
#include <thread>

#include "tools/cmd_bench_common.h"

namespace deepinfer::cli::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

httplib::Headers auth_headers(const BenchOptions& o) {
    httplib::Headers h;
    if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
    return h;
}

// One streamed request; the SSE events are parsed as they arrive.
RequestTiming send_one(const BenchOptions& o, const std::string& model, const std::vector<int32_t>& prompt) {
    RequestTiming t;
    t.input_tokens = static_cast<int64_t>(prompt.size());
    httplib::Client cli(o.url);
    cli.set_read_timeout(3600, 0);
    cli.set_write_timeout(60, 0);
    Json body = {{"model", model},           {"prompt", prompt},    {"max_tokens", o.output_len},
                 {"temperature", 0.0},       {"ignore_eos", true},  {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = auth_headers(o);
    req.headers.emplace("Content-Type", "application/json");
    req.body = body.dump();
    std::string buffer, error_body;
    int64_t chunks = 0, usage_tokens = -1;
    bool done = false;
    Clock::time_point sent, last;
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        const auto now = Clock::now();
        buffer.append(data, len);
        size_t end;
        while ((end = buffer.find("\n\n")) != std::string::npos) {
            std::string event = buffer.substr(0, end);
            buffer.erase(0, end + 2);
            if (event.rfind("data: ", 0) != 0) {
                if (!event.empty() && event[0] != ':') error_body += event;
                continue;
            }
            const std::string payload = event.substr(6);
            if (payload == "[DONE]") {
                done = true;
                continue;
            }
            Json j = Json::parse(payload, nullptr, false);
            if (j.is_discarded()) continue;
            if (j.contains("error")) {
                error_body = payload;
                continue;
            }
            if (j.contains("usage") && j["usage"].is_object()) usage_tokens = j["usage"].value("completion_tokens", int64_t{-1});
            if (!j.contains("choices") || j["choices"].empty()) continue;
            const Json& choice = j["choices"][0];
            const bool has_text = choice.contains("text") && choice["text"].is_string() && !choice["text"].get<std::string>().empty();
            if (!has_text) continue;
            if (chunks == 0) t.ttft = seconds(sent, now);
            else t.itl.push_back(seconds(last, now));
            last = now;
            ++chunks;
        }
        return true;
    };
    sent = Clock::now();
    httplib::Result res = cli.send(req);
    const auto end = Clock::now();
    t.latency = seconds(sent, end);
    if (!res) {
        t.error = "connection failed: " + httplib::to_string(res.error());
        return t;
    }
    if (res->status != 200) {
        t.error = fmt::format("HTTP {}: {}", res->status, error_body.empty() ? buffer : error_body);
        return t;
    }
    if (!done) {
        t.error = "stream ended without [DONE]";
        return t;
    }
    t.output_tokens = usage_tokens >= 0 ? usage_tokens : chunks;
    t.ok = t.output_tokens > 0;
    if (!t.ok) t.error = "no tokens generated";
    return t;
}

Summary run_one(const BenchOptions& o, const std::string& model, const std::vector<std::vector<int32_t>>& prompts,
                int64_t input_len, int concurrency) {
    const std::string label = fmt::format("in {} c{}", input_len, concurrency);
    std::vector<RequestTiming> timings(prompts.size());
    std::counting_semaphore<> slots(concurrency);
    std::mutex progress_mutex;
    int finished = 0;
    std::vector<std::thread> workers;
    std::mt19937_64 rng(o.seed + 7);
    std::exponential_distribution<double> gap(o.request_rate > 0 ? o.request_rate : 1.0);
    const auto start = Clock::now();
    auto next_arrival = start;
    auto last_progress = start;
    for (size_t i = 0; i < prompts.size(); ++i) {
        if (o.request_rate > 0) {
            std::this_thread::sleep_until(next_arrival);
            next_arrival += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
        }
        slots.acquire();
        workers.emplace_back([&, i] {
            timings[i] = send_one(o, model, prompts[i]);
            slots.release();
            std::lock_guard<std::mutex> lock(progress_mutex);
            ++finished;
            const auto now = Clock::now();
            if (!timings[i].ok) fmt::print(stderr, "bench [{}]: request {} failed: {}\n", label, i, timings[i].error);
            if (seconds(last_progress, now) >= 2.0 || finished == static_cast<int>(prompts.size())) {
                fmt::print(stderr, "bench [{}]: {}/{} requests done, {:.1f} s\n", label, finished, prompts.size(), seconds(start, now));
                last_progress = now;
            }
        });
    }
    for (auto& w : workers) w.join();
    Summary s = summarize(label, timings, seconds(start, Clock::now()));
    s.input_len = input_len;
    s.output_len = o.output_len;
    s.concurrency = concurrency;
    s.request_rate = o.request_rate;
    return s;
}

}  // namespace

int run_online(const BenchOptions& o) {
    if (o.num_prompts < 1 || o.output_len < 1 || o.request_rate < 0) {
        fmt::print(stderr, "error: --num-prompts and --output-len must be >= 1, --request-rate >= 0\n");
        return 2;
    }
    for (int c : o.concurrency)
        if (c < 1) {
            fmt::print(stderr, "error: --concurrency values must be >= 1, got {}\n", c);
            return 2;
        }
    httplib::Client cli(o.url);
    if (!cli.is_valid()) {
        fmt::print(stderr, "error: --url {}: not an http:// or https:// URL\n", o.url);
        return 2;
    }
    auto models = cli.Get("/v1/models", auth_headers(o));
    if (!models || models->status != 200) {
        fmt::print(stderr, "error: GET {}/v1/models failed: {}\n", o.url,
                   models ? fmt::format("HTTP {} {}", models->status, models->body) : httplib::to_string(models.error()));
        return 1;
    }
    Json list = Json::parse(models->body, nullptr, false);
    std::string model = o.model_name;
    if (model.empty()) {
        if (list.is_discarded() || !list.contains("data") || list["data"].empty()) {
            fmt::print(stderr, "error: {}/v1/models lists no model\n", o.url);
            return 1;
        }
        model = list["data"][0].value("id", "");
    }
    // Prompts are token ids in [3, --prompt-vocab): above BOS / EOS / PAD and below the added tokens of every
    // V4.1-family tokenizer we make (the tiny synthetic one has 1,024 ids, its added tokens at the top), so
    // the same prompts are valid for any of our servers, and for vLLM serving the released model.
    const int32_t vocab = o.prompt_vocab;
    if (vocab < 16) {
        fmt::print(stderr, "error: --prompt-vocab must be >= 16, got {}\n", vocab);
        return 2;
    }
    std::vector<Summary> rows;
    for (int64_t len : o.input_lens) {
        for (int c : o.concurrency) {
            // Fresh prompts per run (seeded by length and concurrency): no run hits another's prefix cache.
            std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(len) * 1009 + static_cast<uint64_t>(c));
            std::uniform_int_distribution<int32_t> pick(3, vocab - 1);
            std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.num_prompts));
            for (size_t i = 0; i < prompts.size(); ++i) {
                prompts[i].resize(static_cast<size_t>(len));
                for (auto& t : prompts[i]) t = pick(rng);
            }
            rows.push_back(run_one(o, model, prompts, len, c));
        }
    }
    if (o.json) {
        nlohmann::ordered_json j = {{"mode", "online"}, {"url", o.url}, {"model", model}, {"num_prompts", o.num_prompts},
                                    {"results", nlohmann::ordered_json::array()}};
        for (const auto& s : rows) j["results"].push_back(summary_json(s));
        fmt::print("{}\n", j.dump(2));
    } else {
        fmt::print("online benchmark: {} model {}, {} prompts per run, {} output tokens, request rate {}\n", o.url, model,
                   o.num_prompts, o.output_len, o.request_rate > 0 ? fmt::format("{}/s", o.request_rate) : "inf");
        fmt::print("{}", summary_table(rows));
    }
    for (const auto& s : rows)
        if (s.failed > 0) return 1;
    return 0;
}

}  // namespace deepinfer::cli::bench
