// RequestGroup: engine callback -> queue -> HTTP thread.
#include "server/request_group.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>

namespace deepinfer::server {

struct RequestGroup::Channel {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<GenerationOutput> events;
    std::map<std::pair<std::string, int>, std::chrono::steady_clock::time_point> last_event;  // per choice
};

bool ActiveRequests::add(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return false;
    ids_.insert(id);
    return true;
}

void ActiveRequests::remove(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    ids_.erase(id);
}

void ActiveRequests::abort_all(Engine& engine) {
    std::set<std::string> ids;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ = true;
        ids = ids_;
    }
    for (const auto& id : ids) engine.abort(id);
}

RequestGroup::RequestGroup(Engine& engine, ServerMetrics& metrics, ActiveRequests& active)
    : engine_(engine), metrics_(metrics), active_(active), channel_(std::make_shared<Channel>()) {}

RequestGroup::~RequestGroup() {
    if (!finished()) abort();
    for (const auto& id : ids_) active_.remove(id);
}

Status RequestGroup::submit(std::vector<GenerationRequest> requests) {
    for (auto& r : requests) {
        const std::string id = r.id;
        const int n = r.params.n;
        if (!active_.add(id)) {
            abort();
            return error(StatusCode::kCancelled, "the server is shutting down and accepts no new requests");
        }
        std::shared_ptr<Channel> ch = channel_;
        ServerMetrics* metrics = &metrics_;
        Status s = engine_.submit(std::move(r), [ch, metrics](const GenerationOutput& ev) {
            // Engine thread: timestamps here are when the token was produced, not when it is written.
            const auto now = std::chrono::steady_clock::now();
            std::lock_guard<std::mutex> lock(ch->mutex);
            auto key = std::make_pair(ev.request_id, ev.index);
            auto it = ch->last_event.find(key);
            if (!ev.token_ids.empty()) {
                if (it == ch->last_event.end()) {
                    if (ev.time_to_first_token > 0) metrics->ttft.observe(ev.time_to_first_token);
                } else {
                    const double dt = std::chrono::duration<double>(now - it->second).count();
                    for (size_t k = 0; k < ev.token_ids.size(); ++k) metrics->tpot.observe(dt / static_cast<double>(ev.token_ids.size()));
                }
                ch->last_event[key] = now;
            }
            if (ev.finished) {
                metrics->count_finished(ev.finish_reason);
                ch->last_event.erase(key);
            }
            ch->events.push_back(ev);
            ch->cv.notify_one();
        });
        if (!s.is_ok()) {
            active_.remove(id);
            abort();
            return s;
        }
        ids_.push_back(id);
        total_choices_ += n;
    }
    return Status::ok();
}

std::vector<GenerationOutput> RequestGroup::wait(std::chrono::milliseconds timeout) {
    std::vector<GenerationOutput> out;
    std::unique_lock<std::mutex> lock(channel_->mutex);
    channel_->cv.wait_for(lock, timeout, [&] { return !channel_->events.empty(); });
    while (!channel_->events.empty()) {
        out.push_back(std::move(channel_->events.front()));
        channel_->events.pop_front();
    }
    lock.unlock();
    for (const auto& ev : out)
        if (ev.finished) ++finished_choices_;
    return out;
}

void RequestGroup::abort() {
    for (const auto& id : ids_) engine_.abort(id);
}

std::string new_request_id(const std::string& prefix) {
    static const uint64_t process_tag = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
    static std::atomic<uint64_t> counter{0};
    return fmt::format("{}{:016x}{:08x}", prefix, process_tag, static_cast<uint32_t>(counter.fetch_add(1)));
}

}  // namespace deepinfer::server
