// Per-linear timing: a mutex-guarded map, touched only while profiling is on.
#include "ops/op_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

namespace deepinfer::ops {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mutex;
std::map<std::string, OpStat>& stats() {
    static std::map<std::string, OpStat> s;
    return s;
}

}  // namespace

void set_op_profiling(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool op_profiling() { return g_on.load(std::memory_order_relaxed); }

void reset_op_profile() {
    std::lock_guard lock(g_mutex);
    stats().clear();
}

std::vector<OpStat> op_profile() {
    std::vector<OpStat> out;
    {
        std::lock_guard lock(g_mutex);
        for (const auto& [name, s] : stats()) out.push_back(s);
    }
    std::sort(out.begin(), out.end(), [](const OpStat& a, const OpStat& b) { return a.seconds > b.seconds; });
    return out;
}

double OpTimer::now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void OpTimer::record(const OpCall& call, double seconds) {
    std::lock_guard lock(g_mutex);
    OpStat& s = stats()[call.name];
    s.name = call.name;
    s.calls += 1;
    s.seconds += seconds;
    s.bytes += call.bytes;
    s.flops += call.flops;
    s.fp32_math = call.fp32_math;
}

}  // namespace deepinfer::ops
