// The rendezvous of LocalComm (see local_group.h).
#include "dist/local_group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace deepinfer::dist::detail {

const char* local_op_name(LocalOp op) {
    switch (op) {
        case LocalOp::kBarrier: return "barrier";
        case LocalOp::kBroadcast: return "broadcast";
        case LocalOp::kAllReduce: return "all_reduce_sum";
        case LocalOp::kAllGather: return "all_gather";
        case LocalOp::kAllGatherV: return "all_gather_v";
        case LocalOp::kReduceScatter: return "reduce_scatter_sum";
        case LocalOp::kReduceScatterV: return "reduce_scatter_sum_v";
        case LocalOp::kAllToAllV: return "all_to_all_v";
        case LocalOp::kSplit: return "split";
    }
    return "unknown";
}

LocalGroup::LocalGroup(int size)
    : size_(size), posts_(static_cast<size_t>(size)), posted_(static_cast<size_t>(size)),
      left_(static_cast<size_t>(size)) {}

Status LocalGroup::arrive(int rank, LocalPost post, std::chrono::milliseconds timeout) {
    using Clock = std::chrono::steady_clock;
    const LocalOp op = post.op;
    const Clock::time_point deadline = Clock::now() + timeout;
    std::unique_lock lock(mutex_);
    // Returns false on timeout. No deadline arithmetic for "forever": time_point::max() overflows in waits.
    auto wait = [&](auto ready) {
        if (timeout.count() <= 0) {
            changed_.wait(lock, ready);
            return true;
        }
        return changed_.wait_until(lock, deadline, ready);
    };

    // Slots are reused: wait until every rank has read the previous collective.
    if (!wait([&] { return !reading_ || !failed_.is_ok(); })) {
        failed_ = error(StatusCode::kIoError, "{} on rank {} of {}: timed out after {} ms waiting for ranks {} to "
                        "finish the previous collective", local_op_name(op), rank, size_, timeout.count(),
                        missing_ranks());
        changed_.notify_all();
        return failed_;
    }
    if (!failed_.is_ok()) return broken_status(rank, op);
    for (int r = 0; r < size_; ++r) {
        if (!left_[static_cast<size_t>(r)]) continue;
        failed_ = error(StatusCode::kIoError, "{} on rank {} of {}: rank {} has left the group (its communicator "
                        "was destroyed)", local_op_name(op), rank, size_, r);
        changed_.notify_all();
        return failed_;
    }

    if (arrived_ == 0) pending_op_ = op;
    posts_[static_cast<size_t>(rank)] = std::move(post);
    posted_[static_cast<size_t>(rank)] = true;
    if (++arrived_ == size_) {
        Status status = check_posts();
        if (!status.is_ok()) {
            failed_ = status;
            changed_.notify_all();
            return status;
        }
        if (op == LocalOp::kSplit) make_split();
        reading_ = true;
        ++generation_;
        changed_.notify_all();
        return Status::ok();
    }
    const uint64_t generation = generation_;
    if (!wait([&] { return generation_ != generation || !failed_.is_ok(); })) {
        failed_ = error(StatusCode::kIoError, "{} on rank {} of {}: timed out after {} ms waiting for ranks {} "
                        "(dead, stuck or in another collective)", local_op_name(op), rank, size_, timeout.count(),
                        missing_ranks());
        changed_.notify_all();
        return failed_;
    }
    if (generation_ != generation) return Status::ok();
    return broken_status(rank, op);
}

void LocalGroup::depart(int rank) {
    std::lock_guard lock(mutex_);
    posted_[static_cast<size_t>(rank)] = false;
    if (++departed_ < size_) return;
    for (auto& post : posts_) post = LocalPost{};  // release the staged copies now, not at the next call
    split_.clear();
    arrived_ = 0;
    departed_ = 0;
    reading_ = false;
    changed_.notify_all();
}

void LocalGroup::fail(const Status& why) {
    std::lock_guard lock(mutex_);
    if (failed_.is_ok()) failed_ = why;
    changed_.notify_all();
}

void LocalGroup::leave(int rank) {
    std::lock_guard lock(mutex_);
    left_[static_cast<size_t>(rank)] = true;
    // Ranks already waiting in a collective that `rank` will never join fail now instead of at their timeout.
    if (failed_.is_ok() && arrived_ > 0 && !reading_) {
        std::vector<int> waiting;
        for (int r = 0; r < size_; ++r) {
            if (posted_[static_cast<size_t>(r)]) waiting.push_back(r);
        }
        failed_ = error(StatusCode::kIoError, "rank {} of {} left the group (its communicator was destroyed) while "
                        "ranks {} wait in {}", rank, size_, waiting, local_op_name(pending_op_));
        changed_.notify_all();
    }
}

Status LocalGroup::broken_status(int rank, LocalOp op) const {
    return Status(failed_.code(), fmt::format("{} on rank {}: the group is broken: {}", local_op_name(op), rank,
                                              failed_.message()));
}

std::vector<int> LocalGroup::missing_ranks() const {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
        if (!posted_[static_cast<size_t>(r)]) missing.push_back(r);
    }
    return missing;
}

Status LocalGroup::check_posts() const {
    const LocalPost& first = posts_[0];
    for (const LocalPost& post : posts_) {
        if (post.op == first.op) continue;
        std::vector<std::string> calls;
        for (int r = 0; r < size_; ++r) {
            calls.push_back(fmt::format("rank {}: {}", r, local_op_name(posts_[static_cast<size_t>(r)].op)));
        }
        return error(StatusCode::kInternal, "collective mismatch: {}", fmt::join(calls, ", "));
    }
    const char* name = local_op_name(first.op);
    auto disagree = [&](const char* what, auto value_of) -> Status {
        for (int r = 1; r < size_; ++r) {
            if (value_of(posts_[static_cast<size_t>(r)]) == value_of(first)) continue;
            return error(StatusCode::kInternal, "{}: ranks disagree on {}: rank 0 has {}, rank {} has {}", name, what,
                         value_of(first), r, value_of(posts_[static_cast<size_t>(r)]));
        }
        return Status::ok();
    };
    switch (first.op) {
        case LocalOp::kBarrier:
        case LocalOp::kSplit: return Status::ok();
        case LocalOp::kBroadcast:
            DI_RETURN_IF_ERROR(disagree("the root", [](const LocalPost& p) { return p.root; }));
            return disagree("the byte count", [](const LocalPost& p) { return p.count; });
        case LocalOp::kAllReduce:
        case LocalOp::kAllGather:
        case LocalOp::kReduceScatter: return disagree("the count", [](const LocalPost& p) { return p.count; });
        case LocalOp::kAllGatherV:
        case LocalOp::kReduceScatterV:
            return disagree("the counts", [](const LocalPost& p) { return fmt::format("{}", p.counts); });
        case LocalOp::kAllToAllV:
            for (int i = 0; i < size_; ++i) {
                for (int j = 0; j < size_; ++j) {
                    const size_t sent = posts_[static_cast<size_t>(i)].counts[static_cast<size_t>(j)];
                    const size_t expected = posts_[static_cast<size_t>(j)].recv_counts[static_cast<size_t>(i)];
                    if (sent == expected) continue;
                    return error(StatusCode::kInternal, "all_to_all_v: rank {} sends {} bytes to rank {}, which "
                                 "expects {}", i, sent, j, expected);
                }
            }
            return Status::ok();
    }
    return Status::ok();
}

void LocalGroup::make_split() {
    std::map<int, std::vector<std::tuple<int, int>>> members;  // color -> (key, parent rank)
    for (int r = 0; r < size_; ++r) {
        const LocalPost& post = posts_[static_cast<size_t>(r)];
        if (post.color >= 0) members[post.color].emplace_back(post.key, r);
    }
    split_.assign(static_cast<size_t>(size_), LocalSplitSlot{});
    for (auto& [color, ranks] : members) {
        std::sort(ranks.begin(), ranks.end());
        auto group = std::make_shared<LocalGroup>(static_cast<int>(ranks.size()));
        for (size_t i = 0; i < ranks.size(); ++i) {
            split_[static_cast<size_t>(std::get<1>(ranks[i]))] = {group, static_cast<int>(i)};
        }
    }
}

}  // namespace deepinfer::dist::detail
