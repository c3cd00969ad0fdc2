// TwoLevelComm (see two_level_comm.h): the all-reduce runs over two sub-communicators split from the flat one.
#include "dist/two_level_comm.h"

#include <vector>

namespace deepinfer::dist {
namespace {

class TwoLevelComm final : public Comm {
   public:
    TwoLevelComm(std::unique_ptr<Comm> flat, std::unique_ptr<Comm> lane, std::unique_ptr<Comm> cross,
                 TwoLevelOptions options)
        : flat_(std::move(flat)), lane_(std::move(lane)), cross_(std::move(cross)), options_(options) {}

    int rank() const override { return flat_->rank(); }
    int size() const override { return flat_->size(); }
    std::string backend_name() const override {
        return fmt::format("two-level({}, lanes of {})", flat_->backend_name(), options_.lane_size);
    }
    void set_timeout(std::chrono::milliseconds timeout) override {
        flat_->set_timeout(timeout);
        lane_->set_timeout(timeout);
        cross_->set_timeout(timeout);
    }
    std::chrono::milliseconds timeout() const override { return flat_->timeout(); }

    Status barrier() override { return flat_->barrier(); }
    Status broadcast(void* data, size_t bytes, int root) override { return flat_->broadcast(data, bytes, root); }

    Status all_reduce_sum(float* data, size_t count) override {
        // A null buffer also goes to the flat path, whose argument check reports it and breaks the group.
        if (count * sizeof(float) < options_.min_bytes || lane_->size() == 1 || cross_->size() == 1 ||
            (data == nullptr && count > 0)) {
            return flat_->all_reduce_sum(data, count);
        }
        // Lane member i owns shard i; the first count % lane ranks take one extra element.
        const size_t lanes = static_cast<size_t>(lane_->size());
        shard_counts_.assign(lanes, count / lanes);
        for (size_t i = 0; i < count % lanes; ++i) ++shard_counts_[i];
        const size_t mine = shard_counts_[static_cast<size_t>(lane_->rank())];
        shard_.resize(mine);  // fp32 [mine]
        DI_RETURN_IF_ERROR(lane_->reduce_scatter_sum_v(data, shard_counts_, shard_.data()));
        DI_RETURN_IF_ERROR(cross_->all_reduce_sum(shard_.data(), mine));
        for (auto& c : shard_counts_) c *= sizeof(float);
        return lane_->all_gather_v(shard_.data(), shard_counts_, data);
    }

    Status all_gather(const void* send, size_t bytes, void* recv) override {
        return flat_->all_gather(send, bytes, recv);
    }
    Status all_gather_v(const void* send, std::span<const size_t> recv_bytes, void* recv) override {
        return flat_->all_gather_v(send, recv_bytes, recv);
    }
    Status reduce_scatter_sum(const float* send, float* recv, size_t recv_count) override {
        return flat_->reduce_scatter_sum(send, recv, recv_count);
    }
    Status reduce_scatter_sum_v(const float* send, std::span<const size_t> recv_counts, float* recv) override {
        return flat_->reduce_scatter_sum_v(send, recv_counts, recv);
    }
    Status all_to_all_v(const void* send, std::span<const size_t> send_bytes, void* recv,
                        std::span<const size_t> recv_bytes) override {
        return flat_->all_to_all_v(send, send_bytes, recv, recv_bytes);
    }
    Expected<std::unique_ptr<Comm>> split(int color, int key) override { return flat_->split(color, key); }

   private:
    std::unique_ptr<Comm> flat_;
    std::unique_ptr<Comm> lane_;   // the ranks of this rank's lane
    std::unique_ptr<Comm> cross_;  // the ranks at this rank's position in every lane
    TwoLevelOptions options_;
    std::vector<size_t> shard_counts_;
    std::vector<float> shard_;
};

}  // namespace

Expected<std::unique_ptr<Comm>> make_two_level_comm(std::unique_ptr<Comm> flat, TwoLevelOptions options) {
    if (!flat) return invalid_argument("make_two_level_comm: no communicator");
    const int size = flat->size();
    if (options.lane_size < 1 || size % options.lane_size != 0) {
        return invalid_argument("make_two_level_comm: lane size {} does not divide the group size {}",
                                options.lane_size, size);
    }
    const int rank = flat->rank();
    DI_ASSIGN_OR_RETURN(std::unique_ptr<Comm> lane, flat->split(rank / options.lane_size, rank));
    DI_ASSIGN_OR_RETURN(std::unique_ptr<Comm> cross, flat->split(rank % options.lane_size, rank));
    return std::unique_ptr<Comm>(
        std::make_unique<TwoLevelComm>(std::move(flat), std::move(lane), std::move(cross), options));
}

}  // namespace deepinfer::dist
