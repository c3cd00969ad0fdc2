// Shared pieces of `deepinfer bench` (offline through the engine, online against a server): random prompts,
// per-request timings, their summary (mean / p50 / p99) and its text and JSON forms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/engine.h"
#include "dist/comm.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli::bench {

struct RequestTiming {
    bool ok = false;
    std::string error;
    int64_t input_tokens = 0;
    int64_t output_tokens = 0;
    double ttft = 0.0;              // seconds from sending to the first generated token
    double latency = 0.0;           // seconds from sending to the last event
    std::vector<double> itl;        // gaps between successive token events
};

struct Stats {
    double mean = 0.0, p50 = 0.0, p99 = 0.0;
};
Stats stats_of(std::vector<double> values);

struct Summary {
    std::string label;              // e.g. "input 512"
    int64_t input_len = 0, output_len = 0;
    int concurrency = 0;
    double request_rate = 0.0;      // 0: all at once
    int completed = 0, failed = 0;
    double duration = 0.0;          // wall seconds of the run
    int64_t input_tokens = 0, output_tokens = 0;
    Stats ttft, tpot, itl, latency;  // seconds
    double request_throughput = 0.0, output_throughput = 0.0, total_throughput = 0.0;
};
Summary summarize(const std::string& label, const std::vector<RequestTiming>& timings, double duration);

nlohmann::ordered_json summary_json(const Summary& s);
// A fixed-width table, one row per summary, times in milliseconds.
std::string summary_table(const std::vector<Summary>& rows);

// `count` prompts of `length` ids drawn uniformly from the ordinary (non-added, non-special) tokens; a fixed
// seed gives the same prompts. Random ids share no 64-token block, so the prefix cache stays out of the way.
std::vector<std::vector<int32_t>> random_prompts(const tokenizer::Tokenizer& tok, int32_t vocab_size, int count,
                                                 int64_t length, uint64_t seed);

}  // namespace deepinfer::cli::bench

namespace deepinfer::cli::bench {

struct BenchOptions {
    EngineConfig engine;                                  // offline
    std::string url;                                      // online: base URL of a running server
    std::string model_name, api_key;                      // online
    int32_t prompt_vocab = 960;                           // online: prompt ids are drawn from [3, prompt_vocab)
    std::vector<int64_t> input_lens = {512, 1024, 2048, 8192};
    int64_t output_len = 128;
    int num_prompts = 4;
    std::vector<int> concurrency = {1};
    double request_rate = 0.0;                            // online, requests/s (Poisson); 0 = all at once
    uint64_t seed = 0;
    bool json = false;
};

int run_offline(const BenchOptions& o, dist::Comm* world = nullptr);
int run_online(const BenchOptions& o);

}  // namespace deepinfer::cli::bench
