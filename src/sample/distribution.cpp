// to_probabilities / sample_from / argmax (see distribution.h for the semantics and their vLLM sources).
#include "sample/distribution.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "sample/nucleus.h"
#include "sample/select.h"
#include "sample/validate.h"
#include "sample/vec_math.h"

namespace deepinfer::sample {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();
// sample_from's block size: block sums locate the crossing block, then one block is walked entry by entry.
constexpr size_t kCdfBlock = 512;

void write_one_hot(std::span<float> out, int32_t id) {
    std::fill(out.begin(), out.end(), 0.0f);
    out[static_cast<size_t>(id)] = 1.0f;
}

// Divides by the temperature in place (as vLLM's logits.div_(temp)); NaN becomes -inf (excluded) and +inf
// the largest float, so later rankings are strict orders and exp never sees inf - inf. Returns the max.
float apply_temperature(std::span<float> v, float t) {
    for (float& x : v) {
        float y = x / t;
        y = y == y ? y : kNegInf;
        y = y < kMaxFloat ? y : kMaxFloat;
        x = y;
    }
    return max_value(v);
}

}  // namespace

int32_t argmax(std::span<const float> values) {
    // Two vectorisable passes (max, then the first index holding it) beat one scalar compare-and-branch pass.
    const float m = max_value(values);
    for (size_t i = 0; i < values.size(); ++i)
        if (values[i] == m) return static_cast<int32_t>(i);
    return -1;  // every entry is NaN
}

void to_probabilities(std::span<float> v, const SamplingParams& p, Scratch& scratch) {
    const auto vocab = static_cast<int32_t>(v.size());
    DI_CHECK(vocab > 0);
    if (p.temperature == 0.0f) {
        const int32_t best = argmax(v);
        DI_CHECK_MSG(best >= 0 && v[static_cast<size_t>(best)] > kNegInf, "no finite logit to sample from");
        write_one_hot(v, best);
        return;
    }
    const float m = apply_temperature(v, std::max(p.temperature, kMinTemperature));
    DI_CHECK_MSG(m > kNegInf, "no finite logit to sample from");

    const int32_t k = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
    const bool use_top_p = p.top_p < 1.0f;
    const bool use_min_p = p.min_p > 0.0f;
    if (k == vocab && !use_top_p && !use_min_p) {  // plain softmax
        for (float& x : v) x = exp_nonpositive(x - m);
        const double inv_z = 1.0 / sum_double(v);
        for (float& x : v) x = static_cast<float>(x * inv_z);
        return;
    }

    // Masses relative to the max (whose mass is exactly 1), so p_i / p_max = e_i and min-p is e_i >= min_p.
    float* e = scratch.exps(vocab).data();
    for (size_t i = 0; i < v.size(); ++i) e[i] = exp_nonpositive(v[i] - m);

    // Top-p measures the nucleus on the distribution renormalised over the min-p / top-k survivors (mass z,
    // n tokens). Tokens lighter than (1 - top_p) * z / n weigh < (1 - top_p) * z all together, so the mass
    // ranked before each of them exceeds top_p * z: they are dropped up front, in O(vocab). They form a
    // rank-order suffix, so what is left is a rank-order prefix, as truncate_to_nucleus requires. With
    // top-p alone (the common case) z is the vectorised sum over the vocabulary and this drop is fused with
    // building the candidate list.
    const bool top_p_only = use_top_p && !use_min_p && k == vocab;
    double z = top_p_only ? sum_double({e, v.size()}) : 0.0;
    const double keep_from = top_p_only ? (1.0 - static_cast<double>(p.top_p)) * z / vocab
                                        : static_cast<double>(use_min_p ? p.min_p : 0.0f);
    std::vector<int32_t>& ids = scratch.ids();
    ids.resize(v.size());
    size_t n_ids = 0;
    for (int32_t id = 0; id < vocab; ++id) {  // branch-free compaction
        ids[n_ids] = id;
        n_ids += static_cast<double>(e[id]) >= keep_from ? 1 : 0;
    }
    ids.resize(n_ids);

    if (k < static_cast<int32_t>(ids.size())) {
        // Every token tied with the k-th largest x stays (vLLM's threshold semantics).
        std::vector<float>& values = scratch.values(vocab);
        std::span<const float> candidates = v;
        if (ids.size() < v.size()) {
            for (size_t i = 0; i < ids.size(); ++i) values[i] = v[static_cast<size_t>(ids[i])];
            candidates = {values.data(), ids.size()};
        }
        const float kth = kth_largest(candidates, static_cast<size_t>(k), scratch.selection());
        std::erase_if(ids, [&](int32_t id) { return v[static_cast<size_t>(id)] < kth; });
    }

    if (use_top_p) {
        if (!top_p_only) {
            z = 0.0;
            for (int32_t id : ids) z += e[id];
            const double light = (1.0 - static_cast<double>(p.top_p)) * z / static_cast<double>(ids.size());
            std::erase_if(ids, [&](int32_t id) { return static_cast<double>(e[id]) < light; });
        }
        truncate_to_nucleus(ids, v.data(), e, static_cast<double>(p.top_p) * z);
    }

    double kept = 0.0;
    for (int32_t id : ids) kept += e[id];
    const double inv_kept = 1.0 / kept;
    std::fill(v.begin(), v.end(), 0.0f);
    for (int32_t id : ids) v[static_cast<size_t>(id)] = static_cast<float>(e[id] * inv_kept);
}

void to_probabilities(std::span<float> logits_in_probs_out, const SamplingParams& p) {
    Scratch scratch;
    to_probabilities(logits_in_probs_out, p, scratch);
}

int32_t sample_from(std::span<const float> probs, double u) {
    DI_CHECK_MSG(u >= 0.0 && u < 1.0, "uniform draw {} outside [0, 1)", u);
    // The CDF is accumulated per block of kCdfBlock entries (vectorised sums), then entry by entry inside
    // the one block where it crosses u * total. total is the sum of the same block sums, so the blocks
    // partition [0, total) exactly.
    const size_t n_blocks = (probs.size() + kCdfBlock - 1) / kCdfBlock;
    std::vector<double> block_mass(n_blocks);
    double total = 0.0;
    for (size_t b = 0; b < n_blocks; ++b) {
        block_mass[b] = sum_double(probs.subspan(b * kCdfBlock, std::min(kCdfBlock, probs.size() - b * kCdfBlock)));
        total += block_mass[b];
    }
    DI_CHECK_MSG(total > 0.0 && std::isfinite(total), "probabilities sum to {}", total);
    const double target = u * total;
    double cumulative = 0.0;
    for (size_t b = 0; b < n_blocks; ++b) {
        if (cumulative + block_mass[b] <= target) {
            cumulative += block_mass[b];
            continue;
        }
        int32_t last = -1;
        for (size_t i = b * kCdfBlock; i < std::min(probs.size(), (b + 1) * kCdfBlock); ++i) {
            if (!(probs[i] > 0.0f)) continue;
            cumulative += probs[i];
            last = static_cast<int32_t>(i);
            if (cumulative > target) return last;
        }
        return last;  // the entry-wise sum rounded below the block sum: the block's last token with mass
    }
    // Rounding put target at the very top: the last token with mass.
    for (size_t i = probs.size(); i-- > 0;)
        if (probs[i] > 0.0f) return static_cast<int32_t>(i);
    return -1;  // unreachable: total > 0
}

}  // namespace deepinfer::sample
