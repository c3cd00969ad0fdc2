// The communicator interface of tensor and expert parallelism: the collectives the model needs (barrier,
// broadcast, sum all-reduce, all-gather(-v), reduce-scatter(-v), all-to-all-v) and sub-groups. Backends:
// LocalComm (threads of one process, for tests), MpiComm (Open MPI), TwoLevelComm (lanes over either).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "core/status.h"

namespace deepinfer::dist {

// Contract shared by every backend (tests/unit/local_comm_test.cpp and tests/mpi hold them to it):
//
// - Every method except rank()/size()/timeout()/set_timeout()/backend_name() is a collective: every rank of
//   the group calls it, in the same order, with matching arguments (same count, same root, same
//   count vectors; all_to_all_v: send_bytes[j] on rank i == recv_bytes[i] on rank j).
// - Buffers are packed in rank order: the slot of rank r starts at the sum of the counts of ranks < r.
//   Byte counts are bytes; element counts are fp32 elements.
// - Output buffers must not overlap inputs, except the in-place forms stated per method.
// - Sums are computed in fp32 and every rank receives bit-identical results (what tensor parallelism
//   needs so that all ranks sample the same token). LocalComm adds in rank order (rank 0 first); other
//   backends choose their own order, so their results may differ from LocalComm's in the last bits.
// - A failure is a Status, never an exception and never a hang while the timeout is non-zero: a peer
//   that died, left or stopped calling (kIoError, after at most timeout()), mismatched calls
//   (kInternal, where detectable), bad arguments (kInvalidArgument). After any failure the communicator
//   is broken: every later call returns an error at once, and the process should give up the job
//   (MpiComm: abort_mpi()), because peers are no longer in step and MPI cannot cancel a collective.
// - One thread at a time may call a given Comm (the engine loop); distinct Comms may be used from
//   distinct threads only with LocalComm.
class Comm {
   public:
    virtual ~Comm() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    // "local", "mpi", "two-level(mpi)": for logs and benchmark tables.
    virtual std::string backend_name() const = 0;

    // How long one collective may wait for its peers before it fails with kIoError; zero waits forever
    // (MpiComm then uses MPI's blocking collectives, which are faster but hang if a peer stops calling
    // while the MPI runtime keeps the job alive). Local to this rank and this communicator.
    virtual void set_timeout(std::chrono::milliseconds timeout) = 0;
    virtual std::chrono::milliseconds timeout() const = 0;

    // Returns once every rank has entered the barrier.
    virtual Status barrier() = 0;
    // Copy `bytes` bytes of `data` on `root` into `data` on every other rank.
    virtual Status broadcast(void* data, size_t bytes, int root) = 0;
    // In place: data[i] = sum over ranks of data[i].  fp32 [count]
    virtual Status all_reduce_sum(float* data, size_t count) = 0;
    // recv = concat over ranks of send (`bytes` each).  send [bytes], recv [size() * bytes]. In place when
    // send == recv + rank() * bytes.
    virtual Status all_gather(const void* send, size_t bytes, void* recv) = 0;
    // Uneven all-gather: rank r contributes recv_bytes[r] bytes (zero allowed); recv is their concat.
    // recv_bytes has size() entries, identical on every rank. In place when send points at this rank's slot.
    virtual Status all_gather_v(const void* send, std::span<const size_t> recv_bytes, void* recv) = 0;
    // recv = slot rank() of the element-wise sum of send over ranks.  send fp32 [size() * recv_count],
    // recv fp32 [recv_count]
    virtual Status reduce_scatter_sum(const float* send, float* recv, size_t recv_count) = 0;
    // Uneven reduce-scatter: send fp32 [sum(recv_counts)], recv fp32 [recv_counts[rank()]]; recv_counts
    // identical on every rank.
    virtual Status reduce_scatter_sum_v(const float* send, std::span<const size_t> recv_counts, float* recv) = 0;
    // Personalised exchange (expert dispatch and combine): the send_bytes[j] bytes at slot j of send go to
    // rank j, and the recv_bytes[i] bytes from rank i land at slot i of recv. Both spans have size()
    // entries. Exchange the counts first with exchange_counts() when receivers do not know them.
    virtual Status all_to_all_v(const void* send, std::span<const size_t> send_bytes, void* recv,
                                std::span<const size_t> recv_bytes) = 0;
    // Collective over this group: ranks with the same color >= 0 form a new group, ordered by (key, rank).
    // A negative color joins no group and gets a null pointer. The new group starts with this
    // communicator's timeout and is independent of it afterwards.
    virtual Expected<std::unique_ptr<Comm>> split(int color, int key) = 0;

    // bf16 all-reduce with fp32 accumulation: widen, all_reduce_sum, round once (RNE) at the end, so the
    // result is the fp32 sum of the bf16 inputs rounded to bf16. Moves fp32 over the wire.  bf16 [count]
    Status all_reduce_sum_bf16(bf16* data, size_t count);
    // Equal all-to-all: `bytes_per_peer` bytes to and from every rank.  send, recv [size() * bytes_per_peer]
    Status all_to_all(const void* send, size_t bytes_per_peer, void* recv);
};

// Expert dispatch step 0: rank i sends send_counts[j] (items for rank j) and receives what every rank
// will send to it: result[i] = send_counts[rank()] on rank i.  send_counts [size()]
Expected<std::vector<size_t>> exchange_counts(Comm& comm, std::span<const size_t> send_counts);

}  // namespace deepinfer::dist
