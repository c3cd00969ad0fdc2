// The non-virtual helpers of Comm, written once over the virtual collectives.
#include "dist/comm.h"

#include "dist/comm_args.h"

namespace deepinfer::dist {

Status Comm::all_reduce_sum_bf16(bf16* data, size_t count) {
    DI_RETURN_IF_ERROR(detail::check_buffer("all_reduce_sum_bf16", "data", data, count * sizeof(bf16)));
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
    DI_RETURN_IF_ERROR(detail::check_count_vector("exchange_counts", "send_counts", send_counts, comm.size()));
    // Fixed 64-bit width on the wire, whatever size_t is on each rank.
    std::vector<uint64_t> send(send_counts.begin(), send_counts.end());
    std::vector<uint64_t> recv(send.size());
    DI_RETURN_IF_ERROR(comm.all_to_all(send.data(), sizeof(uint64_t), recv.data()));
    return std::vector<size_t>(recv.begin(), recv.end());
}

}  // namespace deepinfer::dist
