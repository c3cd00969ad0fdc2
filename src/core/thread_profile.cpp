#include "core/thread_profile.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace deepinfer {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mutex;
ThreadProfile g_totals;

}  // namespace

ThreadProfile& ThreadProfile::operator+=(const ThreadProfile& o) {
    calls += o.calls;
    chunks += o.chunks;
    threads = std::max(threads, o.threads);
    wall_s += o.wall_s;
    busy_s += o.busy_s;
    busiest_s += o.busiest_s;
    shared_acts_s += o.shared_acts_s;
    shared_waves += o.shared_waves;
    return *this;
}

void set_thread_profiling(bool on) {
    reset_thread_profile();
    g_on.store(on, std::memory_order_relaxed);
}

bool thread_profiling() { return g_on.load(std::memory_order_relaxed); }

ThreadProfile thread_profile() {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_totals;
}

void reset_thread_profile() {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_totals = ThreadProfile{};
}

void record_pool_call(double wall_s, const double* busy_s, int threads, int64_t chunks) {
    ThreadProfile call;
    call.calls = 1;
    call.chunks = chunks;
    call.threads = threads;
    call.wall_s = wall_s;
    for (int t = 0; t < threads; ++t) {
        call.busy_s += busy_s[t];
        call.busiest_s = std::max(call.busiest_s, busy_s[t]);
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_totals += call;
}

void record_shared_acts(double wall_s) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_totals.shared_acts_s += wall_s;
    ++g_totals.shared_waves;
}

}  // namespace deepinfer
