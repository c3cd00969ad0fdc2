// Exact checks of every Comm collective (see comm_checks.h). Each check builds every rank's input from
// (rank, size) alone, so each rank can compute the expected output of the whole group by itself.
#include "support/comm_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>

namespace deepinfer::testing {
namespace {

uint8_t pattern_byte(int a, int b, size_t k) { return static_cast<uint8_t>(a * 37 + b * 11 + static_cast<int>(k)); }

class Checker {
   public:
    explicit Checker(dist::Comm& comm) : comm_(comm), n_(comm.size()), me_(comm.rank()) {}

    // False (and a recorded problem) when a collective failed: the caller stops, the comm is broken.
    bool call(const Status& status, const std::string& what) {
        if (status.is_ok()) return true;
        problems_.push_back(fmt::format("{}: {}", what, status.to_string()));
        failed_ = true;
        return false;
    }
    template <typename T>
    void expect_eq(const T& got, const T& want, const std::string& what) {
        ++checks_;
        if (!(got == want)) problems_.push_back(fmt::format("{}: got {}, want {}", what, got, want));
    }
    void expect_bytes(const void* got, const void* want, size_t bytes, const std::string& what) {
        ++checks_;
        if (bytes > 0 && std::memcmp(got, want, bytes) != 0) {
            problems_.push_back(fmt::format("{}: {} bytes differ from the expected", what, bytes));
        }
    }

    bool failed() const { return failed_; }
    dist::Comm& comm() { return comm_; }
    int n() const { return n_; }
    int me() const { return me_; }
    std::vector<std::string> take_problems() { return std::move(problems_); }
    int checks() const { return checks_; }

   private:
    dist::Comm& comm_;
    int n_;
    int me_;
    std::vector<std::string> problems_;
    int checks_ = 0;
    bool failed_ = false;
};

std::vector<uint8_t> bytes_of(int a, int b, size_t count) {
    std::vector<uint8_t> out(count);
    for (size_t k = 0; k < count; ++k) out[k] = pattern_byte(a, b, k);
    return out;
}

bool check_identity(Checker& c) {
    std::vector<int> ranks(static_cast<size_t>(c.n()), -1);
    const int me = c.me();
    if (!c.call(c.comm().all_gather(&me, sizeof(int), ranks.data()), "all_gather of ranks")) return false;
    for (int r = 0; r < c.n(); ++r) c.expect_eq(ranks[static_cast<size_t>(r)], r, fmt::format("rank slot {}", r));
    return c.call(c.comm().barrier(), "barrier");
}

bool check_broadcast(Checker& c) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{37}, size_t{4096}}) {
        for (int root = 0; root < c.n(); ++root) {
            std::vector<uint8_t> buf = c.me() == root ? bytes_of(root, 1, bytes) : std::vector<uint8_t>(bytes, 0xEE);
            const std::string what = fmt::format("broadcast {} B from {}", bytes, root);
            if (!c.call(c.comm().broadcast(buf.data(), bytes, root), what)) return false;
            c.expect_bytes(buf.data(), bytes_of(root, 1, bytes).data(), bytes, what);
        }
    }
    return true;
}

bool check_all_reduce(Checker& c) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{65537}}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = reduction_input(c.me(), i);
        const std::string what = fmt::format("all_reduce_sum of {}", count);
        if (!c.call(c.comm().all_reduce_sum(data.data(), count), what)) return false;
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int r = 0; r < c.n(); ++r) want += reduction_input(r, i);
            wrong += data[i] != want;
        }
        c.expect_eq(wrong, size_t{0}, what + ": wrong elements");
    }
    // bf16: inputs k/16 with |k| <= 256 are exact in bf16; their sum is exact in fp32 and rounded once.
    const size_t count = 515;
    std::vector<bf16> data(count);
    auto input = [](int rank, size_t i) {
        return static_cast<float>(static_cast<int>((i * 29 + static_cast<size_t>(rank) * 101) % 513) - 256) / 16.0f;
    };
    for (size_t i = 0; i < count; ++i) data[i] = float_to_bf16(input(c.me(), i));
    if (!c.call(c.comm().all_reduce_sum_bf16(data.data(), count), "all_reduce_sum_bf16")) return false;
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int r = 0; r < c.n(); ++r) sum += input(r, i);
        wrong += data[i].bits != float_to_bf16(sum).bits;
    }
    c.expect_eq(wrong, size_t{0}, "all_reduce_sum_bf16: wrong elements");
    return true;
}

// Random fp32 sums depend on the order of addition; tensor parallelism needs every rank to get the same bits.
// Two sizes, because backends switch algorithms with the size (MpiComm: recursive doubling, then a ring).
bool check_bitwise_agreement(Checker& c) {
    for (size_t count : {size_t{4099}, size_t{40000}}) {
        std::mt19937 rng(1234u + static_cast<unsigned>(c.me()));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> data(count);
        for (auto& x : data) x = normal(rng);
        const std::string what = fmt::format("all_reduce_sum of {} random values", count);
        if (!c.call(c.comm().all_reduce_sum(data.data(), count), what)) return false;
        std::vector<float> everyone(count * static_cast<size_t>(c.n()));
        if (!c.call(c.comm().all_gather(data.data(), count * sizeof(float), everyone.data()), what + ": gather")) {
            return false;
        }
        for (int r = 0; r < c.n(); ++r) {
            c.expect_bytes(everyone.data() + count * static_cast<size_t>(r), everyone.data(), count * sizeof(float),
                           fmt::format("{}: rank {} vs rank 0", what, r));
        }
    }
    return true;
}

bool check_all_gather(Checker& c) {
    const size_t n = static_cast<size_t>(c.n());
    for (size_t bytes : {size_t{0}, size_t{3}, size_t{1024}}) {
        std::vector<uint8_t> want;
        for (int r = 0; r < c.n(); ++r) {
            const auto part = bytes_of(r, 2, bytes);
            want.insert(want.end(), part.begin(), part.end());
        }
        const std::vector<uint8_t> send = bytes_of(c.me(), 2, bytes);
        std::vector<uint8_t> recv(bytes * n, 0xEE);
        std::string what = fmt::format("all_gather {} B", bytes);
        if (!c.call(c.comm().all_gather(send.data(), bytes, recv.data()), what)) return false;
        c.expect_bytes(recv.data(), want.data(), want.size(), what);
        // In place: this rank's contribution already sits in its slot.
        std::vector<uint8_t> inplace(bytes * n, 0xEE);
        if (bytes > 0) std::memcpy(inplace.data() + bytes * static_cast<size_t>(c.me()), send.data(), bytes);
        what += " in place";
        if (!c.call(c.comm().all_gather(inplace.data() + bytes * static_cast<size_t>(c.me()), bytes, inplace.data()),
                    what)) {
            return false;
        }
        c.expect_bytes(inplace.data(), want.data(), want.size(), what);
    }
    return true;
}

// Uneven expert loads: some ranks hold nothing, one holds most.
std::vector<size_t> uneven_counts(int n, int variant) {
    std::vector<size_t> counts(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        if (variant == 0) counts[static_cast<size_t>(r)] = r % 3 == 1 ? 0 : static_cast<size_t>(4 * r + 5);
        if (variant == 1) counts[static_cast<size_t>(r)] = r == n - 1 ? 1000 : static_cast<size_t>(r);
    }
    return counts;
}

bool check_all_gather_v(Checker& c) {
    for (int variant = 0; variant < 2; ++variant) {
        const std::vector<size_t> counts = uneven_counts(c.n(), variant);
        std::vector<uint8_t> want;
        for (int r = 0; r < c.n(); ++r) {
            const auto part = bytes_of(r, 3, counts[static_cast<size_t>(r)]);
            want.insert(want.end(), part.begin(), part.end());
        }
        const std::vector<uint8_t> send = bytes_of(c.me(), 3, counts[static_cast<size_t>(c.me())]);
        std::vector<uint8_t> recv(want.size() + 1, 0xEE);  // one guard byte
        std::string what = fmt::format("all_gather_v variant {}", variant);
        if (!c.call(c.comm().all_gather_v(send.data(), counts, recv.data()), what)) return false;
        c.expect_bytes(recv.data(), want.data(), want.size(), what);
        c.expect_eq(static_cast<int>(recv.back()), 0xEE, what + ": guard byte");
        size_t offset = 0;
        for (int r = 0; r < c.me(); ++r) offset += counts[static_cast<size_t>(r)];
        std::vector<uint8_t> inplace(want.size(), 0xEE);
        if (!send.empty()) std::memcpy(inplace.data() + offset, send.data(), send.size());
        what += " in place";
        if (!c.call(c.comm().all_gather_v(inplace.data() + offset, counts, inplace.data()), what)) return false;
        c.expect_bytes(inplace.data(), want.data(), want.size(), what);
    }
    return true;
}

bool check_reduce_scatter(Checker& c, const std::vector<size_t>& counts, bool equal) {
    size_t total = 0;
    size_t offset = 0;
    for (int r = 0; r < c.n(); ++r) {
        if (r == c.me()) offset = total;
        total += counts[static_cast<size_t>(r)];
    }
    std::vector<float> send(total);
    for (size_t i = 0; i < total; ++i) send[i] = reduction_input(c.me(), i);
    const size_t mine = counts[static_cast<size_t>(c.me())];
    std::vector<float> recv(mine + 1, -1.0f);  // one guard element
    const std::string what = fmt::format("reduce_scatter_sum{} counts {}", equal ? "" : "_v", fmt::join(counts, ","));
    const Status status = equal ? c.comm().reduce_scatter_sum(send.data(), recv.data(), mine)
                                : c.comm().reduce_scatter_sum_v(send.data(), counts, recv.data());
    if (!c.call(status, what)) return false;
    size_t wrong = 0;
    for (size_t i = 0; i < mine; ++i) {
        float want = 0;
        for (int r = 0; r < c.n(); ++r) want += reduction_input(r, offset + i);
        wrong += recv[i] != want;
    }
    c.expect_eq(wrong, size_t{0}, what + ": wrong elements");
    c.expect_eq(recv[mine], -1.0f, what + ": guard element");
    return true;
}

bool check_reduce_scatters(Checker& c) {
    const size_t n = static_cast<size_t>(c.n());
    for (size_t each : {size_t{0}, size_t{1}, size_t{129}}) {
        if (!check_reduce_scatter(c, std::vector<size_t>(n, each), true)) return false;
    }
    for (int variant = 0; variant < 2; ++variant) {
        if (!check_reduce_scatter(c, uneven_counts(c.n(), variant), false)) return false;
    }
    return true;
}

bool check_all_to_all_v(Checker& c) {
    const int n = c.n();
    auto bytes_between = [](int from, int to) { return static_cast<size_t>((from + 2 * to) % 4) * 5; };
    std::vector<size_t> send_bytes(static_cast<size_t>(n)), recv_bytes(static_cast<size_t>(n));
    std::vector<uint8_t> send, want;
    for (int peer = 0; peer < n; ++peer) {
        send_bytes[static_cast<size_t>(peer)] = bytes_between(c.me(), peer);
        recv_bytes[static_cast<size_t>(peer)] = bytes_between(peer, c.me());
        const auto out = bytes_of(c.me(), 16 + peer, send_bytes[static_cast<size_t>(peer)]);
        const auto in = bytes_of(peer, 16 + c.me(), recv_bytes[static_cast<size_t>(peer)]);
        send.insert(send.end(), out.begin(), out.end());
        want.insert(want.end(), in.begin(), in.end());
    }
    std::vector<uint8_t> recv(want.size() + 1, 0xEE);
    if (!c.call(c.comm().all_to_all_v(send.data(), send_bytes, recv.data(), recv_bytes), "all_to_all_v")) return false;
    c.expect_bytes(recv.data(), want.data(), want.size(), "all_to_all_v");
    c.expect_eq(static_cast<int>(recv.back()), 0xEE, "all_to_all_v: guard byte");
    return true;
}

bool check_all_to_all(Checker& c) {
    const int n = c.n();
    std::vector<int32_t> equal_send(static_cast<size_t>(n) * 2);
    std::vector<int32_t> equal_recv(static_cast<size_t>(n) * 2, -1);
    for (int peer = 0; peer < n; ++peer) {
        equal_send[2 * static_cast<size_t>(peer)] = c.me();
        equal_send[2 * static_cast<size_t>(peer) + 1] = peer;
    }
    if (!c.call(c.comm().all_to_all(equal_send.data(), 2 * sizeof(int32_t), equal_recv.data()), "all_to_all")) {
        return false;
    }
    for (int peer = 0; peer < n; ++peer) {
        c.expect_eq(equal_recv[2 * static_cast<size_t>(peer)], peer, "all_to_all: sender");
        c.expect_eq(equal_recv[2 * static_cast<size_t>(peer) + 1], c.me(), "all_to_all: addressee");
    }
    return true;
}

// Expert parallelism end to end: route tokens to the rank owning their expert, let the "expert" transform
// them (x -> 2x + owner), send them back and check every token row came home transformed, in order.
bool check_expert_round_trip(Checker& c) {
    const int n = c.n();
    constexpr size_t kWidth = 4;
    const size_t n_tokens = 10 + static_cast<size_t>(c.me()) * 3;
    auto owner = [&](size_t t) { return static_cast<int>((t * 3 + static_cast<size_t>(c.me()) + t / 4) % n); };
    auto value = [&](size_t t, size_t k) { return static_cast<float>(c.me() * 1000 + static_cast<int>(t * 10 + k)); };
    // Pack rows by destination rank, remembering where each token went.
    std::vector<size_t> send_counts(static_cast<size_t>(n));
    for (size_t t = 0; t < n_tokens; ++t) ++send_counts[static_cast<size_t>(owner(t))];
    std::vector<size_t> cursor(static_cast<size_t>(n));
    for (int r = 1; r < n; ++r) {
        cursor[static_cast<size_t>(r)] = cursor[static_cast<size_t>(r - 1)] + send_counts[static_cast<size_t>(r - 1)];
    }
    std::vector<float> send(n_tokens * kWidth);  // fp32 [n_tokens, width], grouped by owner
    std::vector<size_t> slot_of(n_tokens);
    for (size_t t = 0; t < n_tokens; ++t) {
        slot_of[t] = cursor[static_cast<size_t>(owner(t))]++;
        for (size_t k = 0; k < kWidth; ++k) send[slot_of[t] * kWidth + k] = value(t, k);
    }
    Expected<std::vector<size_t>> recv_counts = dist::exchange_counts(c.comm(), send_counts);
    if (!c.call(recv_counts.status(), "exchange_counts")) return false;
    for (int r = 0; r < n; ++r) {
        const size_t theirs = 10 + static_cast<size_t>(r) * 3;
        size_t expected = 0;
        for (size_t t = 0; t < theirs; ++t) {
            expected += static_cast<int>((t * 3 + static_cast<size_t>(r) + t / 4) % n) == c.me();
        }
        c.expect_eq((*recv_counts)[static_cast<size_t>(r)], expected, fmt::format("exchange_counts from {}", r));
    }
    auto to_bytes = [&](std::vector<size_t> rows) {
        for (auto& x : rows) x *= kWidth * sizeof(float);
        return rows;
    };
    size_t received = 0;
    for (size_t x : *recv_counts) received += x;
    std::vector<float> work(received * kWidth);  // fp32 [received, width]
    if (!c.call(c.comm().all_to_all_v(send.data(), to_bytes(send_counts), work.data(), to_bytes(*recv_counts)),
                "expert dispatch")) {
        return false;
    }
    for (float& x : work) x = 2.0f * x + static_cast<float>(c.me());
    std::vector<float> back(send.size(), -1.0f);
    if (!c.call(c.comm().all_to_all_v(work.data(), to_bytes(*recv_counts), back.data(), to_bytes(send_counts)),
                "expert combine")) {
        return false;
    }
    size_t wrong = 0;
    for (size_t t = 0; t < n_tokens; ++t) {
        for (size_t k = 0; k < kWidth; ++k) {
            wrong += back[slot_of[t] * kWidth + k] != 2.0f * value(t, k) + static_cast<float>(owner(t));
        }
    }
    c.expect_eq(wrong, size_t{0}, "expert dispatch/combine: wrong values");
    return true;
}

bool check_split(Checker& c) {
    // Parity groups, ordered by descending parent rank; rank 0 of a group of 3+ sits out.
    const bool sit_out = c.n() >= 3 && c.me() == 0;
    Expected<std::unique_ptr<dist::Comm>> sub = c.comm().split(sit_out ? -1 : c.me() % 2, -c.me());
    if (!c.call(sub.status(), "split")) return false;
    if (sit_out) {
        c.expect_eq(*sub == nullptr, true, "split with a negative color gives no communicator");
        return true;
    }
    std::vector<int> members;  // parent ranks of this group, in their new order
    for (int r = c.n() - 1; r >= 0; --r) {
        if (r % 2 == c.me() % 2 && !(c.n() >= 3 && r == 0)) members.push_back(r);
    }
    if (*sub == nullptr) {
        c.expect_eq(true, false, "split gave no communicator for a non-negative color");
        return true;
    }
    dist::Comm& group = **sub;
    c.expect_eq(group.size(), static_cast<int>(members.size()), "split: group size");
    int position = 0;
    while (members[static_cast<size_t>(position)] != c.me()) ++position;
    c.expect_eq(group.rank(), position, "split: rank in group");
    c.expect_eq(group.timeout().count(), c.comm().timeout().count(), "split: inherited timeout");
    std::vector<float> data(33);
    for (size_t i = 0; i < data.size(); ++i) data[i] = reduction_input(c.me(), i);
    if (!c.call(group.all_reduce_sum(data.data(), data.size()), "sub-group all_reduce_sum")) return false;
    size_t wrong = 0;
    for (size_t i = 0; i < data.size(); ++i) {
        float want = 0;
        for (int r : members) want += reduction_input(r, i);
        wrong += data[i] != want;
    }
    c.expect_eq(wrong, size_t{0}, "sub-group all_reduce_sum: wrong elements");
    std::vector<int> parents(members.size(), -1);
    const int me = c.me();
    if (!c.call(group.all_gather(&me, sizeof(int), parents.data()), "sub-group all_gather")) return false;
    c.expect_eq(fmt::format("{}", fmt::join(parents, ",")), fmt::format("{}", fmt::join(members, ",")),
                "sub-group members in key order");
    return true;
}

}  // namespace

float reduction_input(int rank, size_t i) {
    return static_cast<float>(static_cast<int>((static_cast<size_t>(rank + 1) * 131 + i * 7) % 1024) - 300);
}

std::vector<std::string> check_collectives(dist::Comm& comm, int* checks) {
    Checker c(comm);
    // Each stops the sequence when a call fails: the communicator is then broken for every later call.
    [[maybe_unused]] const bool completed =
        check_identity(c) && check_broadcast(c) && check_all_reduce(c) && check_bitwise_agreement(c) &&
        check_all_gather(c) && check_all_gather_v(c) && check_reduce_scatters(c) && check_all_to_all_v(c) &&
        check_all_to_all(c) && check_expert_round_trip(c) && check_split(c) && c.call(comm.barrier(), "final barrier");
    if (checks != nullptr) *checks = c.checks();
    return c.take_problems();
}

}  // namespace deepinfer::testing
