// LocalComm: each collective stages a copy of this rank's input in the group, meets the other ranks in
// LocalGroup::arrive, then computes its own output from the staged copies (so in-place calls are safe).
#include "dist/local_comm.h"

#include <cstring>
#include <exception>
#include <thread>

#include "core/check.h"
#include "dist/comm_args.h"
#include "dist/local_group.h"

namespace deepinfer::dist {
namespace {

using detail::LocalOp;
using detail::LocalPost;

class LocalComm final : public Comm {
   public:
    LocalComm(std::shared_ptr<detail::LocalGroup> group, int rank, std::chrono::milliseconds timeout)
        : group_(std::move(group)), rank_(rank), timeout_(timeout) {}
    ~LocalComm() override { group_->leave(rank_); }

    int rank() const override { return rank_; }
    int size() const override { return group_->size(); }
    std::string backend_name() const override { return "local"; }
    void set_timeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
    std::chrono::milliseconds timeout() const override { return timeout_; }

    Status barrier() override {
        LocalPost post;
        post.op = LocalOp::kBarrier;
        DI_RETURN_IF_ERROR(meet(std::move(post)));
        group_->depart(rank_);
        return Status::ok();
    }

    Status broadcast(void* data, size_t bytes, int root) override {
        DI_RETURN_IF_ERROR(checked(detail::check_root("broadcast", root, size())));
        DI_RETURN_IF_ERROR(checked(detail::check_buffer("broadcast", "data", data, bytes)));
        LocalPost post;
        post.op = LocalOp::kBroadcast;
        post.root = root;
        post.count = bytes;
        if (rank_ == root) post.bytes = stage(data, bytes);
        DI_RETURN_IF_ERROR(meet(std::move(post)));
        if (rank_ != root && bytes > 0) std::memcpy(data, group_->post(root).bytes.data(), bytes);
        group_->depart(rank_);
        return Status::ok();
    }

    Status all_reduce_sum(float* data, size_t count) override {
        DI_RETURN_IF_ERROR(checked(detail::check_buffer("all_reduce_sum", "data", data, count * sizeof(float))));
        LocalPost post;
        post.op = LocalOp::kAllReduce;
        post.count = count;
        post.floats.assign(data, data + count);
        DI_RETURN_IF_ERROR(meet(std::move(post)));
        sum_in_rank_order(0, count, data);
        group_->depart(rank_);
        return Status::ok();
    }

    Status all_gather(const void* send, size_t bytes, void* recv) override {
        const std::vector<size_t> counts(static_cast<size_t>(size()), bytes);
        return gather(LocalOp::kAllGather, send, counts, recv);
    }

    Status all_gather_v(const void* send, std::span<const size_t> recv_bytes, void* recv) override {
        DI_RETURN_IF_ERROR(checked(detail::check_count_vector("all_gather_v", "recv_bytes", recv_bytes, size())));
        return gather(LocalOp::kAllGatherV, send, recv_bytes, recv);
    }

    Status reduce_scatter_sum(const float* send, float* recv, size_t recv_count) override {
        const std::vector<size_t> counts(static_cast<size_t>(size()), recv_count);
        return reduce_scatter(LocalOp::kReduceScatter, send, counts, recv);
    }

    Status reduce_scatter_sum_v(const float* send, std::span<const size_t> recv_counts, float* recv) override {
        return reduce_scatter(LocalOp::kReduceScatterV, send, recv_counts, recv);
    }

    Status all_to_all_v(const void* send, std::span<const size_t> send_bytes, void* recv,
                        std::span<const size_t> recv_bytes) override {
        DI_RETURN_IF_ERROR(checked(detail::check_all_to_all_v(send, send_bytes, recv, recv_bytes, size())));
        LocalPost post;
        post.op = LocalOp::kAllToAllV;
        post.counts.assign(send_bytes.begin(), send_bytes.end());
        post.recv_counts.assign(recv_bytes.begin(), recv_bytes.end());
        post.bytes = stage(send, detail::total(send_bytes));
        DI_RETURN_IF_ERROR(meet(std::move(post)));
        auto* out = static_cast<std::byte*>(recv);
        for (int source = 0; source < size(); ++source) {
            const LocalPost& theirs = group_->post(source);
            const size_t offset = detail::exclusive_prefix(theirs.counts)[static_cast<size_t>(rank_)];
            const size_t bytes = recv_bytes[static_cast<size_t>(source)];
            if (bytes > 0) std::memcpy(out, theirs.bytes.data() + offset, bytes);
            out += bytes;
        }
        group_->depart(rank_);
        return Status::ok();
    }

    Expected<std::unique_ptr<Comm>> split(int color, int key) override {
        LocalPost post;
        post.op = LocalOp::kSplit;
        post.color = color;
        post.key = key;
        DI_RETURN_IF_ERROR(meet(std::move(post)));
        detail::LocalSplitSlot slot = group_->split_slot(rank_);
        group_->depart(rank_);
        if (!slot.group) return std::unique_ptr<Comm>();
        return std::unique_ptr<Comm>(std::make_unique<LocalComm>(std::move(slot.group), slot.rank, timeout_));
    }

   private:
    // A bad argument on one rank breaks the group, so that its peers fail now rather than at their timeout.
    Status checked(Status status) {
        if (!status.is_ok()) group_->fail(status.with_context(fmt::format("rank {}", rank_)));
        return status;
    }

    Status meet(LocalPost post) { return group_->arrive(rank_, std::move(post), timeout_); }

    static std::vector<std::byte> stage(const void* data, size_t bytes) {
        const auto* p = static_cast<const std::byte*>(data);
        return bytes > 0 ? std::vector<std::byte>(p, p + bytes) : std::vector<std::byte>();
    }

    // out[i] = sum over ranks r of post(r).floats[offset + i], added rank 0 first.
    void sum_in_rank_order(size_t offset, size_t count, float* out) const {
        if (count == 0) return;
        std::memcpy(out, group_->post(0).floats.data() + offset, count * sizeof(float));
        for (int r = 1; r < size(); ++r) {
            const float* in = group_->post(r).floats.data() + offset;
            for (size_t i = 0; i < count; ++i) out[i] += in[i];
        }
    }

    Status gather(LocalOp op, const void* send, std::span<const size_t> recv_bytes, void* recv) {
        DI_RETURN_IF_ERROR(checked(detail::check_all_gather_v(send, recv_bytes, recv, rank_, size())));
        LocalPost post;
        post.op = op;
        post.count = recv_bytes[static_cast<size_t>(rank_)];
        post.counts.assign(recv_bytes.begin(), recv_bytes.end());
        post.bytes = stage(send, post.count);
        DI_RETURN_IF_ERROR(meet(std::move(post)));
        auto* out = static_cast<std::byte*>(recv);
        for (int r = 0; r < size(); ++r) {
            const std::vector<std::byte>& theirs = group_->post(r).bytes;
            if (!theirs.empty()) std::memcpy(out, theirs.data(), theirs.size());
            out += recv_bytes[static_cast<size_t>(r)];
        }
        group_->depart(rank_);
        return Status::ok();
    }

    Status reduce_scatter(LocalOp op, const float* send, std::span<const size_t> recv_counts, float* recv) {
        DI_RETURN_IF_ERROR(checked(detail::check_reduce_scatter_v(send, recv_counts, recv, rank_, size())));
        LocalPost post;
        post.op = op;
        post.count = recv_counts[static_cast<size_t>(rank_)];
        post.counts.assign(recv_counts.begin(), recv_counts.end());
        post.floats.assign(send, send + detail::total(recv_counts));
        DI_RETURN_IF_ERROR(meet(std::move(post)));
        sum_in_rank_order(detail::exclusive_prefix(recv_counts)[static_cast<size_t>(rank_)],
                          recv_counts[static_cast<size_t>(rank_)], recv);
        group_->depart(rank_);
        return Status::ok();
    }

    std::shared_ptr<detail::LocalGroup> group_;
    int rank_;
    std::chrono::milliseconds timeout_;
};

}  // namespace

LocalWorld::LocalWorld(int size, LocalWorldOptions options)
    : size_(size), options_(options), taken_(static_cast<size_t>(size)) {
    DI_CHECK_MSG(size >= 1, "LocalWorld needs at least one rank, got {}", size);
    group_ = std::make_shared<detail::LocalGroup>(size);
}

LocalWorld::~LocalWorld() = default;

std::unique_ptr<Comm> LocalWorld::take(int rank) {
    DI_CHECK_MSG(rank >= 0 && rank < size_, "rank {} outside a LocalWorld of {}", rank, size_);
    DI_CHECK_MSG(!taken_[static_cast<size_t>(rank)], "the Comm of rank {} was already taken", rank);
    taken_[static_cast<size_t>(rank)] = true;
    return std::make_unique<LocalComm>(group_, rank, options_.timeout);
}

std::vector<Status> run_local_ranks(int size, const std::function<Status(Comm&)>& fn, LocalWorldOptions options) {
    LocalWorld world(size, options);
    std::vector<Status> results(static_cast<size_t>(size));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
        threads.emplace_back([&results, &fn, r, comm = world.take(r)]() mutable {
            Status& result = results[static_cast<size_t>(r)];
            try {
                result = fn(*comm);
            } catch (const std::exception& e) {
                result = error(StatusCode::kInternal, "rank {} threw: {}", r, e.what());
            } catch (...) {
                result = error(StatusCode::kInternal, "rank {} threw a non-standard exception", r);
            }
            comm.reset();  // now, so that peers waiting on this rank fail instead of hanging
        });
    }
    for (auto& thread : threads) thread.join();
    return results;
}

}  // namespace deepinfer::dist
