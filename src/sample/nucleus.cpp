// truncate_to_nucleus: histogram of the candidates' logits, cumulative mass per bucket from the top, and an
// exact rank-order walk only inside the bucket where the mass crosses the target (see nucleus.h).
#include "sample/nucleus.h"

#include <algorithm>
#include <vector>

namespace deepinfer::sample {

namespace {
constexpr size_t kBuckets = 4096;
constexpr size_t kSortDirectly = 4096;  // below this many candidates sorting chunks is cheaper than a histogram
constexpr size_t kFirstChunk = 64;      // chunks double: a nucleus of m tokens costs O(log(m / 64)) selections

// Walks ids[first, last) in rank order, continuing a running mass `before`; returns how many of them are
// kept. Sorts only as far as the walk goes: nth_element peels off the next chunk, which is then sorted.
size_t walk_in_rank_order(std::vector<int32_t>::iterator first, std::vector<int32_t>::iterator last,
                          const float* x, const float* e, double before, double target) {
    const RankedBefore better{x};
    const auto n = static_cast<size_t>(last - first);
    size_t done = 0;
    size_t chunk = kFirstChunk;
    while (done < n) {
        const size_t end = std::min(n, done + chunk);
        const auto chunk_first = first + static_cast<std::ptrdiff_t>(done);
        const auto chunk_last = first + static_cast<std::ptrdiff_t>(end);
        if (end < n) std::nth_element(chunk_first, chunk_last, last, better);
        std::sort(chunk_first, chunk_last, better);
        for (size_t i = done; i < end; ++i) {
            if (before >= target) return i;
            before += e[first[static_cast<std::ptrdiff_t>(i)]];
        }
        done = end;
        chunk *= 2;
    }
    return n;
}
}  // namespace

void truncate_to_nucleus(std::vector<int32_t>& ids, const float* x, const float* e, double target) {
    float hi = x[ids.empty() ? 0 : ids[0]], lo = hi;
    for (int32_t id : ids) {
        hi = std::max(hi, x[id]);
        lo = std::min(lo, x[id]);
    }
    if (ids.size() <= kSortDirectly || !(hi > lo)) {
        ids.resize(walk_in_rank_order(ids.begin(), ids.end(), x, e, 0.0, target));
        return;
    }

    // Bucket 0 holds the largest x. The bucket index is monotone (non-increasing) in x, so every bucket is a
    // contiguous stretch of the rank order and bucket b's tokens rank after all of bucket b - 1's.
    const double top = hi;
    const double scale = static_cast<double>(kBuckets) / (top - static_cast<double>(lo));
    auto bucket_of = [&](int32_t id) {
        return std::min(kBuckets - 1, static_cast<size_t>((top - static_cast<double>(x[id])) * scale));
    };
    std::vector<double> mass(kBuckets, 0.0);
    for (int32_t id : ids) mass[bucket_of(id)] += e[id];

    // The crossing bucket b is the first whose cumulative mass reaches target: its first token has mass
    // before it < target (kept), every later bucket's tokens have >= target before them (dropped), and every
    // earlier bucket's tokens are kept. Only bucket b needs the exact walk.
    double before = 0.0;
    size_t b = 0;
    while (b < kBuckets && before + mass[b] < target) before += mass[b++];
    if (b == kBuckets) return;  // rounding left target at the total mass: everything is kept

    const auto kept_end = std::partition(ids.begin(), ids.end(), [&](int32_t id) { return bucket_of(id) < b; });
    const auto crossing_end = std::partition(kept_end, ids.end(), [&](int32_t id) { return bucket_of(id) == b; });
    const size_t kept_in_bucket = walk_in_rank_order(kept_end, crossing_end, x, e, before, target);
    ids.resize(static_cast<size_t>(kept_end - ids.begin()) + kept_in_bucket);
}

}  // namespace deepinfer::sample
