// Drivers of the row-wise ops: rows split over the pool when a call is big enough to pay for the hand-off
// (prefill; a decode row runs on the calling thread), and the indexer top-k as a radix select whose two
// linear passes are ISA routines.
#include <algorithm>
#include <numeric>

#include "backend/cpu/drivers.h"
#include "backend/ref/ref_kernels.h"
#include "core/check.h"

namespace deepinfer::backend::cpu {
namespace {

// Below this many elements a call runs on the calling thread: waking the pool costs a few microseconds,
// about what 16 k elements of these ops take.
constexpr int64_t kSerialElements = 16384;

template <class Fn>
void over_rows(ThreadPool& pool, int64_t n, int64_t row_elements, const Fn& fn) {
    if (n <= 0) return;
    if (n == 1 || n * row_elements <= kSerialElements || pool.size() == 1) {
        fn(0, n);
        return;
    }
    // Chunks of about kSerialElements, at least 4 per thread so a late thread is not waited for.
    const int64_t by_size = std::max<int64_t>(1, kSerialElements / std::max<int64_t>(1, row_elements));
    const int64_t by_count = std::max<int64_t>(1, n / (4 * static_cast<int64_t>(pool.size())));
    for_chunks(pool, n, std::min(by_size, by_count), [](int) {}, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

}  // namespace

void rms_norm(const IsaOps& ops, const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y,
              ThreadPool& pool) {
    over_rows(pool, n, dim, [&](int64_t r0, int64_t r1) { ops.rms_norm_rows(x, dim, w, eps, y, r0, r1); });
}

void swiglu(const IsaOps& ops, const bf16* gate, const bf16* up, int64_t n, int inter, float limit,
            const float* row_weight, bf16* h, ThreadPool& pool) {
    over_rows(pool, n, inter,
              [&](int64_t r0, int64_t r1) { ops.swiglu_rows(gate, up, inter, limit, row_weight, h, r0, r1); });
}

void hc_sinkhorn(const IsaOps& ops, const float* mixes, int64_t n, const float* scale, const float* base, int hc,
                 int iters, float eps, float* pre, float* post, float* comb, ThreadPool& pool) {
    if (hc > kMaxSimdHc) {
        ref::hc_sinkhorn(mixes, n, scale, base, hc, iters, eps, pre, post, comb, pool);
        return;
    }
    // A row costs about iters * hc * hc * 4 operations; rows go in SIMD groups, so keep chunks whole groups.
    const int64_t row_cost = static_cast<int64_t>(iters) * hc * hc * 4;
    over_rows(pool, (n + 15) / 16, 16 * row_cost, [&](int64_t g0, int64_t g1) {
        ops.hc_sinkhorn_rows(mixes, scale, base, hc, iters, eps, pre, post, comb, g0 * 16, std::min(n, g1 * 16));
    });
}

void hc_collapse(const IsaOps& ops, const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y,
                 ThreadPool& pool) {
    over_rows(pool, n, static_cast<int64_t>(hc) * dim,
              [&](int64_t r0, int64_t r1) { ops.hc_collapse_rows(x, pre, hc, dim, y, r0, r1); });
}

void hc_expand(const IsaOps& ops, const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb,
               int hc, int dim, bf16* out, ThreadPool& pool) {
    over_rows(pool, n, static_cast<int64_t>(hc) * hc * dim,
              [&](int64_t r0, int64_t r1) { ops.hc_expand_rows(o, res, post, comb, hc, dim, out, r0, r1); });
}

void topk_entries(const IsaOps& ops, const float* scores, int64_t width, int k, int32_t* out) {
    DI_CHECK_LE(static_cast<int64_t>(k), width);
    if (k <= 0) return;
    if (k >= width) {  // every entry (the common case while the context is short)
        std::iota(out, out + width, 0);
        return;
    }
    AlignedBuffer& scratch = thread_scratch().topk;
    scratch.ensure(static_cast<size_t>(width) * 2 * sizeof(uint32_t));
    auto* keys = reinterpret_cast<uint32_t*>(scratch.data());
    ops.order_keys(scores, width, keys);
    // Radix select of the k-th largest key, 11 + 11 + 10 bits from the top: `prefix` holds the digits decided
    // so far, `rank` the place of the wanted key among the keys that share them (1 = largest). After the
    // first digit only the keys sharing it (the candidates) are scanned again.
    int64_t hist[2048];
    auto select_digit = [&](const uint32_t* v, int64_t count, int shift, int bits, uint32_t* prefix, int64_t* rank) {
        const uint32_t digit_mask = (1u << bits) - 1;
        std::fill(hist, hist + (int64_t{1} << bits), 0);
        for (int64_t j = 0; j < count; ++j) ++hist[(v[j] >> shift) & digit_mask];
        int64_t d = digit_mask;
        for (; d > 0 && *rank > hist[d]; --d) *rank -= hist[d];
        *prefix |= static_cast<uint32_t>(d) << shift;
    };
    uint32_t prefix = 0;
    int64_t rank = k;
    select_digit(keys, width, 21, 11, &prefix, &rank);
    uint32_t* candidates = keys + width;
    int64_t n_cand = 0;
    for (int64_t j = 0; j < width; ++j) {
        candidates[n_cand] = keys[j];
        n_cand += (keys[j] >> 21) == (prefix >> 21);
    }
    select_digit(candidates, n_cand, 10, 11, &prefix, &rank);
    int64_t kept = 0;
    for (int64_t j = 0; j < n_cand; ++j) {
        candidates[kept] = candidates[j];
        kept += (candidates[j] >> 10) == (prefix >> 10);
    }
    select_digit(candidates, kept, 0, 10, &prefix, &rank);
    // `prefix` is the k-th largest key; `rank` of the keys equal to it belong to the k (the lowest entries).
    const int64_t got = ops.select_entries(keys, width, prefix, rank, out);
    DI_CHECK_EQ(got, static_cast<int64_t>(k));
}

void gather_fp8_rows(const IsaOps& ops, const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows,
                     int64_t count, bf16* out, ThreadPool& pool) {
    over_rows(pool, count, dim, [&](int64_t r0, int64_t r1) { ops.gather_fp8_rows(codes, scales, dim, rows, out, r0, r1); });
}

void unpack_records(const IsaOps& ops, CacheRecord kind, const uint8_t* const* records, int64_t count, int dim,
                    bf16* out, ThreadPool& pool) {
    DI_CHECK_MSG(dim % 32 == 0, "unpack_records: dim {} is not a multiple of 32", dim);
    over_rows(pool, count, dim,
              [&](int64_t r0, int64_t r1) { ops.unpack_records_rows(kind, records, dim, out, r0, r1); });
}

}  // namespace deepinfer::backend::cpu
