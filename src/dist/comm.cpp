// The non-virtual helpers of Comm, written once over the virtual collectives.
#include "dist/comm.h"

namespace deepinfer::dist {

// Bad arguments go through the backend's own check (here: a null buffer), so that they break the
// communicator the way every collective's bad arguments do instead of leaving the peers to wait.
Status Comm::all_reduce_sum_bf16(bf16* data, size_t count) {
    if (data == nullptr && count > 0) return all_reduce_sum(nullptr, count);
    std::vector<float> wide(count);  // fp32 [count]
    for (size_t i = 0; i < count; ++i) wide[i] = bf16_to_float(data[i]);
    DI_RETURN_IF_ERROR(all_reduce_sum(wide.data(), count));
    for (size_t i = 0; i < count; ++i) data[i] = float_to_bf16(wide[i]);
    return Status::ok();
}

Status Comm::all_to_all(const void* send, size_t bytes_per_peer, void* recv) {
    const std::vector<size_t> counts(static_cast<size_t>(size()), bytes_per_peer);
    return all_to_all_v(send, counts, recv, counts);
}

Expected<std::vector<size_t>> exchange_counts(Comm& comm, std::span<const size_t> send_counts) {
    if (send_counts.size() != static_cast<size_t>(comm.size())) {
        return comm.all_to_all_v(nullptr, send_counts, nullptr, send_counts).with_context("exchange_counts");
    }
    // Fixed 64-bit width on the wire, whatever size_t is on each rank.
    std::vector<uint64_t> send(send_counts.begin(), send_counts.end());
    std::vector<uint64_t> recv(send.size());
    DI_RETURN_IF_ERROR(comm.all_to_all(send.data(), sizeof(uint64_t), recv.data()));
    return std::vector<size_t>(recv.begin(), recv.end());
}

}  // namespace deepinfer::dist
