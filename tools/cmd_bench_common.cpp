// Statistics, tables and prompts for `deepinfer bench` (see cmd_bench_common.h).
#include "tools/cmd_bench_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

namespace deepinfer::cli::bench {

Stats stats_of(std::vector<double> v) {
    Stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    // Linear interpolation between closest ranks (numpy's default percentile).
    auto pct = [&](double q) {
        const double pos = q * static_cast<double>(v.size() - 1);
        const size_t lo = static_cast<size_t>(pos);
        const size_t hi = std::min(lo + 1, v.size() - 1);
        return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
    };
    s.p50 = pct(0.50);
    s.p99 = pct(0.99);
    return s;
}

Summary summarize(const std::string& label, const std::vector<RequestTiming>& timings, double duration) {
    Summary s;
    s.label = label;
    s.duration = duration;
    std::vector<double> ttft, tpot, itl, latency;
    for (const auto& t : timings) {
        if (!t.ok) {
            ++s.failed;
            continue;
        }
        ++s.completed;
        s.input_tokens += t.input_tokens;
        s.output_tokens += t.output_tokens;
        ttft.push_back(t.ttft);
        latency.push_back(t.latency);
        if (t.output_tokens > 1) tpot.push_back((t.latency - t.ttft) / static_cast<double>(t.output_tokens - 1));
        itl.insert(itl.end(), t.itl.begin(), t.itl.end());
    }
    s.ttft = stats_of(ttft);
    s.tpot = stats_of(tpot);
    s.itl = stats_of(itl);
    s.latency = stats_of(latency);
    if (duration > 0) {
        s.request_throughput = s.completed / duration;
        s.output_throughput = static_cast<double>(s.output_tokens) / duration;
        s.total_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / duration;
    }
    return s;
}

nlohmann::ordered_json summary_json(const Summary& s) {
    using Json = nlohmann::ordered_json;
    auto ms = [](const Stats& x) { return Json{{"mean", x.mean * 1e3}, {"p50", x.p50 * 1e3}, {"p99", x.p99 * 1e3}}; };
    return {{"label", s.label},
            {"input_len", s.input_len},
            {"output_len", s.output_len},
            {"concurrency", s.concurrency},
            {"request_rate", s.request_rate > 0 ? Json(s.request_rate) : Json("inf")},
            {"completed", s.completed},
            {"failed", s.failed},
            {"duration_s", s.duration},
            {"input_tokens", s.input_tokens},
            {"output_tokens", s.output_tokens},
            {"ttft_ms", ms(s.ttft)},
            {"tpot_ms", ms(s.tpot)},
            {"itl_ms", ms(s.itl)},
            {"latency_ms", ms(s.latency)},
            {"request_throughput", s.request_throughput},
            {"output_throughput", s.output_throughput},
            {"total_throughput", s.total_throughput}};
}

std::string summary_table(const std::vector<Summary>& rows) {
    std::string out = fmt::format("{:<14} {:>5} {:>5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
                                  "run", "conc", "done", "TTFTmean", "TTFTp50", "TTFTp99", "TPOTmean", "TPOTp50",
                                  "TPOTp99", "ITLp50", "ITLp99", "req/s", "out t/s", "tot t/s");
    for (const auto& s : rows) {
        out += fmt::format("{:<14} {:>5} {:>5} {:>9.1f} {:>9.1f} {:>9.1f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.3f} {:>8.1f} {:>8.1f}\n",
                           s.label, s.concurrency, s.completed, s.ttft.mean * 1e3, s.ttft.p50 * 1e3, s.ttft.p99 * 1e3,
                           s.tpot.mean * 1e3, s.tpot.p50 * 1e3, s.tpot.p99 * 1e3, s.itl.p50 * 1e3, s.itl.p99 * 1e3,
                           s.request_throughput, s.output_throughput, s.total_throughput);
    }
    out += "(times in ms; TPOT = (latency - TTFT) / (output tokens - 1) per request; ITL = gaps between token events)\n";
    return out;
}

std::vector<std::vector<int32_t>> random_prompts(const tokenizer::Tokenizer& tok, int32_t vocab_size, int count,
                                                 int64_t length, uint64_t seed) {
    const std::vector<int32_t> added = tok.added_token_ids();
    const std::set<int32_t> excluded(added.begin(), added.end());
    std::vector<int32_t> pool;
    for (int32_t id = 0; id < std::min(vocab_size, tok.vocab_size()); ++id)
        if (tok.has_id(id) && !tok.is_special(id) && !excluded.count(id)) pool.push_back(id);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
        auto& p = prompts[static_cast<size_t>(i)];
        p.resize(static_cast<size_t>(length));
        for (auto& t : p) t = pool[pick(rng)];
    }
    return prompts;
}

}  // namespace deepinfer::cli::bench
