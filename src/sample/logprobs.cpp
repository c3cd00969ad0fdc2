// Raw-logit log-softmax and top-n logprobs (see logprobs.h for why raw logits).
#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "sample/select.h"
#include "sample/vec_math.h"

namespace deepinfer::sample {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// NaN ranks as -inf so orders stay strict (std::sort / nth_element require it).
inline float rank_key(float x) { return std::isnan(x) ? kNegInf : x; }
}  // namespace

float Logprobs::of(int32_t token) const {
    DI_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size());
    return static_cast<float>((static_cast<double>(logits[static_cast<size_t>(token)]) - max) - log_sum_exp);
}

Logprobs log_softmax(std::span<const float> logits) {
    Logprobs lp;
    lp.logits = logits;
    const float m = max_value(logits);
    DI_CHECK_MSG(std::isfinite(m), "log_softmax needs a finite largest logit, got {}", m);
    lp.max = m;
    // Terms exp(x - max) in fp32 (relative error < 4e-7 each), summed in double; a NaN logit adds 0 and
    // reports a NaN logprob of its own.
    lp.log_sum_exp = std::log(sum_exp_double(logits, m));
    return lp;
}

void top_logprobs(const Logprobs& lp, int32_t n, std::vector<std::pair<int32_t, float>>& out, Scratch& scratch) {
    out.clear();
    const auto vocab = static_cast<int32_t>(lp.logits.size());
    n = std::min(n, vocab);
    if (n <= 0) return;
    const float* x = lp.logits.data();

    // The n-th largest value (select.h) on a NaN-free copy, then the ids at or above it (ties included)
    // in id order, the best n of them sorted by (value, id): O(vocab + c log n) for c >= n candidates (c = n
    // unless values tie at the threshold).
    std::vector<float>& values = scratch.values(vocab);
    for (int32_t i = 0; i < vocab; ++i) values[static_cast<size_t>(i)] = rank_key(x[i]);
    const float threshold =
        kth_largest({values.data(), static_cast<size_t>(vocab)}, static_cast<size_t>(n), scratch.selection());
    std::vector<int32_t>& ids = scratch.ids();
    ids.clear();
    for (int32_t i = 0; i < vocab; ++i)
        if (rank_key(x[i]) >= threshold) ids.push_back(i);
    const auto better = [x](int32_t a, int32_t b) {
        const float ka = rank_key(x[a]), kb = rank_key(x[b]);
        return ka > kb || (ka == kb && a < b);
    };
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), better);
    out.reserve(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) out.emplace_back(ids[static_cast<size_t>(i)], lp.of(ids[static_cast<size_t>(i)]));
}

}  // namespace deepinfer::sample
