// The shared state of one LocalComm group (internal to src/dist): a rendezvous where each rank posts a
// staged copy of its contribution, the last one to arrive checks that the calls match, everybody reads
// the posts they need, and the slots are reused once every rank has departed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace deepinfer::dist::detail {

enum class LocalOp { kBarrier, kBroadcast, kAllReduce, kAllGather, kAllGatherV, kReduceScatter, kReduceScatterV,
                     kAllToAllV, kSplit };
const char* local_op_name(LocalOp op);

// One rank's call: its arguments (checked against the other ranks') and its staged data.
struct LocalPost {
    LocalOp op = LocalOp::kBarrier;
    int root = 0;
    size_t count = 0;                // bytes (broadcast, all_gather) or fp32 elements (reductions)
    std::vector<size_t> counts;      // all_gather_v / reduce_scatter_sum_v counts; all_to_all_v send bytes
    std::vector<size_t> recv_counts; // all_to_all_v receive bytes
    int color = 0;
    int key = 0;
    std::vector<std::byte> bytes;    // staged payload of the byte collectives
    std::vector<float> floats;       // staged payload of the reductions
};

class LocalGroup;

// Where a split put each rank of the parent group: its new group (null for a negative color) and rank.
struct LocalSplitSlot {
    std::shared_ptr<LocalGroup> group;
    int rank = -1;
};

class LocalGroup {
   public:
    explicit LocalGroup(int size);

    int size() const { return size_; }

    // Post `post` for `rank` and wait until every rank has posted and the calls were found to match.
    // On success the caller may read post(r) / split_slot(r) until it calls depart(). timeout zero waits
    // forever. Any failure breaks the group for every rank.
    Status arrive(int rank, LocalPost post, std::chrono::milliseconds timeout);
    const LocalPost& post(int rank) const { return posts_[static_cast<size_t>(rank)]; }
    const LocalSplitSlot& split_slot(int rank) const { return split_[static_cast<size_t>(rank)]; }
    // The caller has finished reading; the last rank to depart frees the slots for the next collective.
    void depart(int rank);

    // Break the group: every rank waiting now or calling later gets `why`.
    void fail(const Status& why);
    // `rank` will never call again (its Comm was destroyed): a pending or later collective fails.
    void leave(int rank);

   private:
    // The following hold mutex_.
    Status broken_status(int rank, LocalOp op) const;
    Status check_posts() const;
    void make_split();
    std::vector<int> missing_ranks() const;

    const int size_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<LocalPost> posts_;
    std::vector<bool> posted_;
    std::vector<bool> left_;
    std::vector<LocalSplitSlot> split_;
    int arrived_ = 0;
    int departed_ = 0;
    bool reading_ = false;     // all arrived, posts are being read: no new post until all departed
    uint64_t generation_ = 0;  // bumped when a collective completes its rendezvous
    LocalOp pending_op_ = LocalOp::kBarrier;
    Status failed_;
};

}  // namespace deepinfer::dist::detail
