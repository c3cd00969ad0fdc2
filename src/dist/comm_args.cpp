// Argument checks shared by the Comm backends (see comm_args.h).
#include "dist/comm_args.h"

#include <functional>
#include <numeric>

namespace deepinfer::dist::detail {

Status check_root(const char* op, int root, int size) {
    if (root < 0 || root >= size) return invalid_argument("{}: root {} outside the group of {} ranks", op, root, size);
    return Status::ok();
}

Status check_count_vector(const char* op, const char* name, std::span<const size_t> counts, int size) {
    if (counts.size() != static_cast<size_t>(size)) {
        return invalid_argument("{}: {} has {} entries, expected one per rank ({})", op, name, counts.size(), size);
    }
    return Status::ok();
}

Status check_buffer(const char* op, const char* name, const void* data, size_t bytes) {
    if (bytes > 0 && data == nullptr) {
        return invalid_argument("{}: {} is null but {} bytes were asked for", op, name, bytes);
    }
    return Status::ok();
}

Status check_disjoint(const char* op, const void* out, size_t out_bytes, const void* in, size_t in_bytes) {
    if (out_bytes == 0 || in_bytes == 0) return Status::ok();
    // std::less gives a total order on pointers into different objects, unlike the built-in <.
    std::less<const std::byte*> less;
    const auto* o = static_cast<const std::byte*>(out);
    const auto* i = static_cast<const std::byte*>(in);
    if (less(o, i + in_bytes) && less(i, o + out_bytes)) {
        return invalid_argument("{}: output buffer overlaps the input buffer", op);
    }
    return Status::ok();
}

Status check_gather_send(const char* op, const void* send, size_t send_bytes, const void* recv, size_t slot_offset,
                         size_t recv_bytes) {
    if (send == static_cast<const std::byte*>(recv) + slot_offset) return Status::ok();
    return check_disjoint(op, recv, recv_bytes, send, send_bytes);
}

size_t total(std::span<const size_t> counts) { return std::accumulate(counts.begin(), counts.end(), size_t{0}); }

std::vector<size_t> exclusive_prefix(std::span<const size_t> counts) {
    std::vector<size_t> offsets(counts.size());
    size_t sum = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        offsets[i] = sum;
        sum += counts[i];
    }
    return offsets;
}

Status check_all_gather_v(const void* send, std::span<const size_t> recv_bytes, const void* recv, int rank,
                          int size) {
    constexpr const char* kOp = "all_gather_v";
    DI_RETURN_IF_ERROR(check_count_vector(kOp, "recv_bytes", recv_bytes, size));
    const size_t recv_total = total(recv_bytes);
    const size_t mine = recv_bytes[static_cast<size_t>(rank)];
    DI_RETURN_IF_ERROR(check_buffer(kOp, "send", send, mine));
    DI_RETURN_IF_ERROR(check_buffer(kOp, "recv", recv, recv_total));
    return check_gather_send(kOp, send, mine, recv, exclusive_prefix(recv_bytes)[static_cast<size_t>(rank)],
                             recv_total);
}

Status check_reduce_scatter_v(const float* send, std::span<const size_t> recv_counts, const float* recv, int rank,
                              int size) {
    constexpr const char* kOp = "reduce_scatter_sum_v";
    DI_RETURN_IF_ERROR(check_count_vector(kOp, "recv_counts", recv_counts, size));
    const size_t send_bytes = total(recv_counts) * sizeof(float);
    const size_t recv_bytes = recv_counts[static_cast<size_t>(rank)] * sizeof(float);
    DI_RETURN_IF_ERROR(check_buffer(kOp, "send", send, send_bytes));
    DI_RETURN_IF_ERROR(check_buffer(kOp, "recv", recv, recv_bytes));
    return check_disjoint(kOp, recv, recv_bytes, send, send_bytes);
}

Status check_all_to_all_v(const void* send, std::span<const size_t> send_bytes, const void* recv,
                          std::span<const size_t> recv_bytes, int size) {
    constexpr const char* kOp = "all_to_all_v";
    DI_RETURN_IF_ERROR(check_count_vector(kOp, "send_bytes", send_bytes, size));
    DI_RETURN_IF_ERROR(check_count_vector(kOp, "recv_bytes", recv_bytes, size));
    const size_t send_total = total(send_bytes);
    const size_t recv_total = total(recv_bytes);
    DI_RETURN_IF_ERROR(check_buffer(kOp, "send", send, send_total));
    DI_RETURN_IF_ERROR(check_buffer(kOp, "recv", recv, recv_total));
    return check_disjoint(kOp, recv, recv_total, send, send_total);
}

}  // namespace deepinfer::dist::detail
