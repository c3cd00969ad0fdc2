// The engine requests behind one HTTP request (one per prompt, each with n choices): submission, the events
// the engine callback delivers (queued here and consumed by the HTTP thread), latency metrics observed when
// the engine emits, and cancellation. Destroying a group aborts whatever has not finished, so a client that
// goes away frees its sequences and KV blocks.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "server/metrics.h"

namespace deepinfer::server {

// Ids of the engine requests in flight, so that a forced shutdown can cancel them all; once closed, no new
// request is admitted.
class ActiveRequests {
   public:
    bool add(const std::string& id);  // false once closed
    void remove(const std::string& id);
    // Close and abort every registered request.
    void abort_all(Engine& engine);

   private:
    std::mutex mutex_;
    std::set<std::string> ids_;
    bool closed_ = false;
};

class RequestGroup {
   public:
    RequestGroup(Engine& engine, ServerMetrics& metrics, ActiveRequests& active);
    ~RequestGroup();
    RequestGroup(const RequestGroup&) = delete;
    RequestGroup& operator=(const RequestGroup&) = delete;

    // Submits every request (ids must be unique). When the engine refuses one, those already submitted are
    // aborted and the refusal is returned.
    Status submit(std::vector<GenerationRequest> requests);
    // Events that arrived, waiting up to `timeout` for the first one; empty on timeout.
    std::vector<GenerationOutput> wait(std::chrono::milliseconds timeout);
    // Every choice of every request has delivered its final event through wait().
    bool finished() const { return finished_choices_ == total_choices_; }
    int total_choices() const { return total_choices_; }
    // Cancel what has not finished (the engine sends final "abort" events).
    void abort();

   private:
    struct Channel;
    Engine& engine_;
    ServerMetrics& metrics_;
    ActiveRequests& active_;
    std::shared_ptr<Channel> channel_;  // shared with the engine callbacks, which may outlive the group
    std::vector<std::string> ids_;
    int total_choices_ = 0;
    int finished_choices_ = 0;
};

// A fresh id with the given prefix ("cmpl-", "chatcmpl-"): 24 hex digits, unique within the process.
std::string new_request_id(const std::string& prefix);

}  // namespace deepinfer::server
