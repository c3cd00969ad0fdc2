// MpiComm over Open MPI (see mpi_comm.h for the threading and failure guarantees). With a timeout, each
// collective is the non-blocking MPI call polled with MPI_Testall against a deadline (the all-reduce and
// the reduce-scatter: our own point-to-point algorithms, polled the same way); without one, the blocking
// call. The only file of the project that includes mpi.h.
#include "dist/mpi_comm.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "dist/comm_args.h"
#include "dist/two_level_comm.h"

namespace deepinfer::dist {
namespace {

// MPI counts and displacements are int: larger calls are split (uniform ones) or refused (the -v ones).
constexpr size_t kMaxChunk = size_t{1} << 30;
// How a waiting rank polls. Oversubscribed (more ranks on the node than cores): it yields its core after a
// few hundred polls, because the peer it waits for may need that core. Otherwise it spins, as Open MPI's
// blocking calls do: yielding (tried after 1 ms) handed the core to unrelated processes on a busy machine,
// and the two ranks fell into taking turns at 2-4 ms per collective. Only a wait past kSpinLimit, a slow
// peer rather than a message in flight, sleeps between polls, so that a long wait does not burn a core.
constexpr int kPollsBeforeYieldOversubscribed = 256;
constexpr std::chrono::milliseconds kSpinLimit{100};
constexpr std::chrono::microseconds kLongWaitPoll{50};
// Guarded all-reduce: recursive doubling (log2 n messages of the whole vector) up to this size on a
// power-of-two group, the bandwidth-optimal ring (2 (n - 1) messages of 1/n of it) above.
constexpr size_t kRecursiveDoublingMaxBytes = size_t{64} << 10;
// Point-to-point tag of the guarded all-reduce and reduce-scatter; MPI keeps collective traffic apart.
constexpr int kRingTag = 0x6469;  // "di"
using Clock = std::chrono::steady_clock;

bool g_initialised_here = false;

std::string mpi_error_text(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
    return std::string(text, static_cast<size_t>(length));
}

class MpiComm final : public Comm {
   public:
    // Takes ownership of `comm`, which already returns errors (MPI_ERRORS_RETURN).
    MpiComm(MPI_Comm comm, std::chrono::milliseconds timeout, bool oversubscribed)
        : comm_(comm), timeout_(timeout), oversubscribed_(oversubscribed) {
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
    }
    ~MpiComm() override {
        int finalized = 0;
        MPI_Finalized(&finalized);
        // A broken communicator may have a collective in flight that never completes: leak it.
        if (!finalized && broken_.is_ok()) MPI_Comm_free(&comm_);
    }

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string backend_name() const override { return "mpi"; }
    void set_timeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
    std::chrono::milliseconds timeout() const override { return timeout_; }

    Status barrier() override {
        return run("barrier", [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); },
                   [&] { return MPI_Barrier(comm_); });
    }

    Status broadcast(void* data, size_t bytes, int root) override {
        DI_RETURN_IF_ERROR(checked(detail::check_root("broadcast", root, size_)));
        DI_RETURN_IF_ERROR(checked(detail::check_buffer("broadcast", "data", data, bytes)));
        size_t done = 0;
        do {  // at least once, so that a zero-byte broadcast is still a collective
            const int n = static_cast<int>(std::min(bytes - done, kMaxChunk));
            void* p = static_cast<std::byte*>(data) + done;
            DI_RETURN_IF_ERROR(run(
                "broadcast", [&](MPI_Request* r) { return MPI_Ibcast(p, n, MPI_BYTE, root, comm_, r); },
                [&] { return MPI_Bcast(p, n, MPI_BYTE, root, comm_); }));
            done += static_cast<size_t>(n);
        } while (done < bytes);
        return Status::ok();
    }

    Status all_reduce_sum(float* data, size_t count) override {
        DI_RETURN_IF_ERROR(checked(detail::check_buffer("all_reduce_sum", "data", data, count * sizeof(float))));
        size_t done = 0;
        do {
            const int n = static_cast<int>(std::min(count - done, kMaxChunk));
            float* p = data + done;
            if (guarded()) {
                DI_RETURN_IF_ERROR(guarded_all_reduce(p, n));
                done += static_cast<size_t>(n);
                continue;
            }
            DI_RETURN_IF_ERROR(run(
                "all_reduce_sum",
                [&](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, p, n, MPI_FLOAT, MPI_SUM, comm_, r); },
                [&] { return MPI_Allreduce(MPI_IN_PLACE, p, n, MPI_FLOAT, MPI_SUM, comm_); }));
            done += static_cast<size_t>(n);
        } while (done < count);
        return Status::ok();
    }

    Status all_gather(const void* send, size_t bytes, void* recv) override {
        const std::vector<size_t> counts(static_cast<size_t>(size_), bytes);
        DI_RETURN_IF_ERROR(checked(detail::check_all_gather_v(send, counts, recv, rank_, size_)));
        DI_RETURN_IF_ERROR(checked(fits_int("all_gather", bytes)));
        const int n = static_cast<int>(bytes);
        const void* source = send == static_cast<std::byte*>(recv) + bytes * static_cast<size_t>(rank_) ? MPI_IN_PLACE
                                                                                                          : send;
        return run("all_gather",
                   [&](MPI_Request* r) { return MPI_Iallgather(source, n, MPI_BYTE, recv, n, MPI_BYTE, comm_, r); },
                   [&] { return MPI_Allgather(source, n, MPI_BYTE, recv, n, MPI_BYTE, comm_); });
    }

    Status all_gather_v(const void* send, std::span<const size_t> recv_bytes, void* recv) override {
        DI_RETURN_IF_ERROR(checked(detail::check_all_gather_v(send, recv_bytes, recv, rank_, size_)));
        DI_RETURN_IF_ERROR(checked(int_layout("all_gather_v", recv_bytes, &counts_a_, &displs_a_)));
        const size_t mine = static_cast<size_t>(displs_a_[static_cast<size_t>(rank_)]);
        const void* source = send == static_cast<std::byte*>(recv) + mine ? MPI_IN_PLACE : send;
        const int n = counts_a_[static_cast<size_t>(rank_)];
        return run("all_gather_v",
                   [&](MPI_Request* r) {
                       return MPI_Iallgatherv(source, n, MPI_BYTE, recv, counts_a_.data(), displs_a_.data(), MPI_BYTE,
                                              comm_, r);
                   },
                   [&] {
                       return MPI_Allgatherv(source, n, MPI_BYTE, recv, counts_a_.data(), displs_a_.data(), MPI_BYTE,
                                             comm_);
                   });
    }

    Status reduce_scatter_sum(const float* send, float* recv, size_t recv_count) override {
        const std::vector<size_t> counts(static_cast<size_t>(size_), recv_count);
        DI_RETURN_IF_ERROR(checked(detail::check_reduce_scatter_v(send, counts, recv, rank_, size_)));
        DI_RETURN_IF_ERROR(checked(fits_int("reduce_scatter_sum", recv_count)));
        if (guarded()) return guarded_reduce_scatter("reduce_scatter_sum", send, counts, recv);
        const int n = static_cast<int>(recv_count);
        return run("reduce_scatter_sum",
                   [&](MPI_Request* r) {
                       return MPI_Ireduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm_, r);
                   },
                   [&] { return MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm_); });
    }

    Status reduce_scatter_sum_v(const float* send, std::span<const size_t> recv_counts, float* recv) override {
        DI_RETURN_IF_ERROR(checked(detail::check_reduce_scatter_v(send, recv_counts, recv, rank_, size_)));
        DI_RETURN_IF_ERROR(checked(int_layout("reduce_scatter_sum_v", recv_counts, &counts_a_, &displs_a_)));
        if (guarded()) return guarded_reduce_scatter("reduce_scatter_sum_v", send, recv_counts, recv);
        return run("reduce_scatter_sum_v",
                   [&](MPI_Request* r) {
                       return MPI_Ireduce_scatter(send, recv, counts_a_.data(), MPI_FLOAT, MPI_SUM, comm_, r);
                   },
                   [&] { return MPI_Reduce_scatter(send, recv, counts_a_.data(), MPI_FLOAT, MPI_SUM, comm_); });
    }

    Status all_to_all_v(const void* send, std::span<const size_t> send_bytes, void* recv,
                        std::span<const size_t> recv_bytes) override {
        DI_RETURN_IF_ERROR(checked(detail::check_all_to_all_v(send, send_bytes, recv, recv_bytes, size_)));
        DI_RETURN_IF_ERROR(checked(int_layout("all_to_all_v", send_bytes, &counts_a_, &displs_a_)));
        DI_RETURN_IF_ERROR(checked(int_layout("all_to_all_v", recv_bytes, &counts_b_, &displs_b_)));
        return run("all_to_all_v",
                   [&](MPI_Request* r) {
                       return MPI_Ialltoallv(send, counts_a_.data(), displs_a_.data(), MPI_BYTE, recv,
                                             counts_b_.data(), displs_b_.data(), MPI_BYTE, comm_, r);
                   },
                   [&] {
                       return MPI_Alltoallv(send, counts_a_.data(), displs_a_.data(), MPI_BYTE, recv, counts_b_.data(),
                                            displs_b_.data(), MPI_BYTE, comm_);
                   });
    }

    Expected<std::unique_ptr<Comm>> split(int color, int key) override {
        // MPI_Comm_split has no non-blocking form: a timed all-gather first proves every peer reached
        // the split, so the blocking call that follows cannot wait on a dead one.
        const int mine[2] = {color, key};
        std::vector<int> all(2 * static_cast<size_t>(size_));
        DI_RETURN_IF_ERROR(all_gather(mine, sizeof(mine), all.data()));
        if (!broken_.is_ok()) return broken_;
        MPI_Comm sub = MPI_COMM_NULL;
        int rc = MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub);
        if (rc != MPI_SUCCESS) return fail("split", rc);
        if (sub == MPI_COMM_NULL) return std::unique_ptr<Comm>();
        rc = MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
        if (rc != MPI_SUCCESS) return fail("split", rc);
        return std::unique_ptr<Comm>(std::make_unique<MpiComm>(sub, timeout_, oversubscribed_));
    }

   private:
    // Run one collective: the blocking form without a timeout, else the non-blocking one under a deadline.
    template <typename Start, typename Blocking>
    Status run(const char* op, Start start, Blocking blocking) {
        if (!broken_.is_ok()) return broken_status(op);
        if (timeout_.count() <= 0) {
            const int rc = blocking();
            return rc == MPI_SUCCESS ? Status::ok() : fail(op, rc);
        }
        const Clock::time_point deadline = Clock::now() + timeout_;
        MPI_Request request = MPI_REQUEST_NULL;
        const int rc = start(&request);
        if (rc != MPI_SUCCESS) return fail(op, rc);
        return wait(op, &request, 1, deadline);
    }

    // The guarded all-reduce runs on point-to-point messages rather than MPI_Iallreduce: Open MPI's
    // non-blocking collectives (libnbc) took 2-6x the time of its blocking ones from 4 KiB to 1 MiB on two
    // ranks, and all-reduce is the collective of tensor parallelism. Every rank gets the same bits: in
    // recursive doubling both partners add the same two partial sums (IEEE addition commutes), in the
    // ring each chunk is summed once and then copied.
    Status guarded_all_reduce(float* data, int count) {
        if (!broken_.is_ok()) return broken_status("all_reduce_sum");
        const Clock::time_point deadline = Clock::now() + timeout_;
        const bool power_of_two = (size_ & (size_ - 1)) == 0;
        if (power_of_two && static_cast<size_t>(count) * sizeof(float) <= kRecursiveDoublingMaxBytes) {
            scratch_.resize(static_cast<size_t>(count));
            for (int mask = 1; mask < size_; mask <<= 1) {
                const int peer = rank_ ^ mask;
                DI_RETURN_IF_ERROR(
                    exchange("all_reduce_sum", data, count, peer, scratch_.data(), count, peer, deadline));
                for (int i = 0; i < count; ++i) data[i] += scratch_[static_cast<size_t>(i)];
            }
            return Status::ok();
        }
        // Ring: chunk c is [offset[c], offset[c] + length[c]); the first count % size chunks are one longer.
        const int n = size_;
        auto length = [&](int c) { return count / n + (c < count % n ? 1 : 0); };
        auto offset = [&](int c) { return c * (count / n) + std::min(c, count % n); };
        auto chunk = [&](int c) { return ((c % n) + n) % n; };
        const int right = (rank_ + 1) % n;
        const int left = (rank_ + n - 1) % n;
        scratch_.resize(static_cast<size_t>(length(0)));
        // Reduce-scatter: after step s this rank holds the partial sum of s + 2 ranks for chunk rank - s - 1;
        // after n - 1 steps, the full sum of chunk rank + 1.
        for (int s = 0; s < n - 1; ++s) {
            const int out = chunk(rank_ - s);
            const int in = chunk(rank_ - s - 1);
            DI_RETURN_IF_ERROR(exchange("all_reduce_sum", data + offset(out), length(out), right, scratch_.data(),
                                        length(in), left, deadline));
            float* sum = data + offset(in);
            for (int i = 0; i < length(in); ++i) sum[i] += scratch_[static_cast<size_t>(i)];
        }
        // All-gather: pass the finished chunks around the ring.
        for (int s = 0; s < n - 1; ++s) {
            const int out = chunk(rank_ + 1 - s);
            const int in = chunk(rank_ - s);
            DI_RETURN_IF_ERROR(exchange("all_reduce_sum", data + offset(out), length(out), right, data + offset(in),
                                        length(in), left, deadline));
        }
        return Status::ok();
    }

    // Guarded reduce-scatter: the first half of the all-reduce's ring, because MPI_Ireduce_scatter(_block)
    // took 2-3x the time of an all-reduce of the same buffer. Rank c's slot starts on rank c + 1 with that
    // rank's contribution and travels the ring, each rank adding its own, to arrive complete on rank c.
    Status guarded_reduce_scatter(const char* op, const float* send, std::span<const size_t> counts, float* recv) {
        if (!broken_.is_ok()) return broken_status(op);
        const Clock::time_point deadline = Clock::now() + timeout_;
        const int n = size_;
        const std::vector<size_t> offsets = detail::exclusive_prefix(counts);
        const size_t longest = *std::max_element(counts.begin(), counts.end());
        scratch_.resize(2 * longest);
        float* partial = scratch_.data();            // fp32 [longest]: the slot this rank passes on next
        float* incoming = scratch_.data() + longest;  // fp32 [longest]
        auto slot = [&](int c) { return static_cast<size_t>(((c % n) + n) % n); };
        for (int s = 0; s < n - 1; ++s) {
            const size_t out = slot(rank_ - s - 1);
            const size_t in = slot(rank_ - s - 2);
            const float* outgoing = s == 0 ? send + offsets[out] : partial;
            DI_RETURN_IF_ERROR(exchange(op, outgoing, static_cast<int>(counts[out]), (rank_ + 1) % n, incoming,
                                        static_cast<int>(counts[in]), (rank_ + n - 1) % n, deadline));
            float* sum = s == n - 2 ? recv : partial;  // the last slot to arrive is this rank's own
            const float* own = send + offsets[in];
            for (size_t i = 0; i < counts[in]; ++i) sum[i] = incoming[i] + own[i];
        }
        return Status::ok();
    }

    // Send `send` to `to` while receiving `recv` from `from`, under the collective's deadline.
    Status exchange(const char* op, const float* send, int send_count, int to, float* recv, int recv_count,
                    int from, Clock::time_point deadline) {
        MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        int rc = MPI_Irecv(recv, recv_count, MPI_FLOAT, from, kRingTag, comm_, &requests[0]);
        if (rc != MPI_SUCCESS) return fail(op, rc);
        rc = MPI_Isend(send, send_count, MPI_FLOAT, to, kRingTag, comm_, &requests[1]);
        if (rc != MPI_SUCCESS) return fail(op, rc);
        return wait(op, requests, 2, deadline);
    }

    // Guarded collectives that run on point-to-point messages; a group of one has nobody to wait for
    // and takes the MPI collective, which returns at once.
    bool guarded() const { return timeout_.count() > 0 && size_ > 1; }

    // Poll until every request (at most two) completed, the deadline passed or MPI reported an error.
    Status wait(const char* op, MPI_Request* requests, int n_requests, Clock::time_point deadline) {
        const Clock::time_point start = Clock::now();
        MPI_Status statuses[2];
        for (int polls = 0;; ++polls) {
            int done = 0;
            const int rc = MPI_Testall(n_requests, requests, &done, statuses);
            if (rc == MPI_ERR_IN_STATUS) {  // name the failed request's own error, not "error in status"
                for (int i = 0; i < n_requests; ++i) {
                    if (statuses[i].MPI_ERROR != MPI_SUCCESS) return fail(op, statuses[i].MPI_ERROR);
                }
            }
            if (rc != MPI_SUCCESS) return fail(op, rc);
            if (done) return Status::ok();
            const Clock::time_point now = Clock::now();
            if (now >= deadline) {
                broken_ = error(StatusCode::kIoError, "{} on MPI rank {} of {} timed out after {} ms (a peer died, "
                                "is stuck or called another collective)", op, rank_, size_, timeout_.count());
                return broken_;
            }
            if (now - start >= kSpinLimit) {
                std::this_thread::sleep_for(kLongWaitPoll);
            } else if (oversubscribed_ && polls >= kPollsBeforeYieldOversubscribed) {
                sched_yield();
            }
        }
    }

    Status broken_status(const char* op) const {
        return Status(broken_.code(), fmt::format("{}: communicator broken earlier: {}", op, broken_.message()));
    }

    Status fail(const char* op, int rc) {
        broken_ = error(StatusCode::kIoError, "{} on MPI rank {} of {}: {}", op, rank_, size_, mpi_error_text(rc));
        return broken_;
    }

    // A bad argument desynchronises this rank from its peers: the communicator is broken from now on.
    Status checked(Status status) {
        if (!status.is_ok() && broken_.is_ok()) broken_ = status;
        return status;
    }

    static Status fits_int(const char* op, size_t count) {
        if (count > static_cast<size_t>(INT_MAX)) {
            return invalid_argument("{}: count {} exceeds MPI's int range; split the call", op, count);
        }
        return Status::ok();
    }

    // int counts and displacements for the MPI -v calls.
    static Status int_layout(const char* op, std::span<const size_t> counts, std::vector<int>* out_counts,
                             std::vector<int>* out_displs) {
        out_counts->resize(counts.size());
        out_displs->resize(counts.size());
        size_t offset = 0;
        for (size_t i = 0; i < counts.size(); ++i) {
            DI_RETURN_IF_ERROR(fits_int(op, offset + counts[i]));
            (*out_counts)[i] = static_cast<int>(counts[i]);
            (*out_displs)[i] = static_cast<int>(offset);
            offset += counts[i];
        }
        return Status::ok();
    }

    MPI_Comm comm_;
    int rank_ = 0;
    int size_ = 1;
    std::chrono::milliseconds timeout_;
    bool oversubscribed_;
    Status broken_;
    // The -v calls' int layouts; members because a non-blocking call reads them until it completes.
    std::vector<int> counts_a_, displs_a_, counts_b_, displs_b_;
    std::vector<float> scratch_;  // fp32 [message]: what the guarded all-reduce receives before adding it
};

const char* thread_level_name(int level) {
    switch (level) {
        case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
        case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
        case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
        case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
        default: return "unknown";
    }
}

}  // namespace

bool mpi_built() { return true; }

Expected<std::unique_ptr<Comm>> init_mpi_comm(int* argc, char*** argv, const MpiOptions& options) {
    int initialised = 0;
    int finalised = 0;
    MPI_Initialized(&initialised);
    MPI_Finalized(&finalised);
    if (finalised) return error(StatusCode::kInternal, "init_mpi_comm: MPI was already finalised in this process");
    int provided = MPI_THREAD_SINGLE;
    if (!initialised) {
        const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return error(StatusCode::kIoError, "MPI_Init_thread: {}", mpi_error_text(rc));
        g_initialised_here = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        return error(StatusCode::kUnsupported, "init_mpi_comm: MPI provides {}, deepinfer needs MPI_THREAD_SERIALIZED",
                     thread_level_name(provided));
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm world = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &world);
    if (rc != MPI_SUCCESS) return error(StatusCode::kIoError, "MPI_Comm_dup: {}", mpi_error_text(rc));
    rc = MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) return error(StatusCode::kIoError, "MPI_Comm_set_errhandler: {}", mpi_error_text(rc));
    // Ranks sharing this node against its cores (not this process's affinity: mpirun binds each of two
    // ranks to one core, which is not oversubscription).
    MPI_Comm node = MPI_COMM_NULL;
    rc = MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return error(StatusCode::kIoError, "MPI_Comm_split_type: {}", mpi_error_text(rc));
    int ranks_on_node = 1;
    MPI_Comm_size(node, &ranks_on_node);
    MPI_Comm_free(&node);
    const bool oversubscribed = ranks_on_node > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::unique_ptr<Comm> comm = std::make_unique<MpiComm>(world, options.timeout, oversubscribed);
    if (options.lane_size <= 1) return comm;
    return make_two_level_comm(std::move(comm), {options.lane_size, options.lane_min_bytes});
}

Status finalize_mpi() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!g_initialised_here || finalised) return Status::ok();
    const int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) return error(StatusCode::kIoError, "MPI_Finalize: {}", mpi_error_text(rc));
    return Status::ok();
}

void abort_mpi(int exit_code) {
    int initialised = 0;
    int finalised = 0;
    MPI_Initialized(&initialised);
    MPI_Finalized(&finalised);
    if (initialised && !finalised) MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
}

std::string mpi_library_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown MPI library";
    std::string version(text, static_cast<size_t>(length));
    while (!version.empty() && (version.back() == '\n' || version.back() == '\0')) version.pop_back();
    return version;
}

}  // namespace deepinfer::dist
