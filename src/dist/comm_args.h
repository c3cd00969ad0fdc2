// Argument checks shared by the Comm backends, so that every backend rejects the same calls with the same
// messages (internal to src/dist). Each returns kInvalidArgument naming the collective and the argument.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/status.h"

namespace deepinfer::dist::detail {

Status check_root(const char* op, int root, int size);
// counts.size() must equal the group size.
Status check_count_vector(const char* op, const char* name, std::span<const size_t> counts, int size);
// A buffer of non-zero length must not be null.
Status check_buffer(const char* op, const char* name, const void* data, size_t bytes);
// Output and input must not overlap.
Status check_disjoint(const char* op, const void* out, size_t out_bytes, const void* in, size_t in_bytes);
// Gather send buffer: either exactly this rank's slot of recv (in place) or disjoint from recv.
Status check_gather_send(const char* op, const void* send, size_t send_bytes, const void* recv, size_t slot_offset,
                         size_t recv_bytes);

size_t total(std::span<const size_t> counts);
// offsets[r] = sum of counts[0..r), with offsets.size() == counts.size().
std::vector<size_t> exclusive_prefix(std::span<const size_t> counts);
// The whole-argument check of each collective, shared by the backends.
Status check_all_gather_v(const void* send, std::span<const size_t> recv_bytes, const void* recv, int rank,
                          int size);
Status check_reduce_scatter_v(const float* send, std::span<const size_t> recv_counts, const float* recv, int rank,
                              int size);
Status check_all_to_all_v(const void* send, std::span<const size_t> send_bytes, const void* recv,
                          std::span<const size_t> recv_bytes, int size);

}  // namespace deepinfer::dist::detail
