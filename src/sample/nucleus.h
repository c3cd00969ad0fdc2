// Top-p selection without sorting the candidates: the walk over the rank order that decides which tokens
// form the nucleus, done on a histogram of the scaled logits and a sort of one bucket. Internal to
// distribution.cpp; separate because it is the one non-obvious algorithm of the sampler.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::sample {

// Rank order of the filters: larger x first, ties to the lower id. A strict total order when x holds no
// NaN, so nth_element / sort give one answer whatever the standard library.
struct RankedBefore {
    const float* x;
    bool operator()(int32_t a, int32_t b) const {
        const float xa = x[a], xb = x[b];
        return xa > xb || (xa == xb && a < b);
    }
};

// ids: candidate token ids forming a prefix of the rank order (any internal order); x: scaled logits by
// id (finite for every candidate); e: masses by id. Keeps exactly the candidates whose mass ranked strictly
// before them is < target, i.e. the nucleus including the token that crosses target. ids ends up holding
// the nucleus in no particular order.
// Cost: O(n) for n candidates, plus O(c log c) for the c candidates of the bucket where the running mass
// crosses target (one bucket of 4096 spanning the candidates' logit range; all of them only when they are
// tied). Small candidate sets (<= 4096) are sorted in doubling chunks instead.
void truncate_to_nucleus(std::vector<int32_t>& ids, const float* x, const float* e, double target);

}  // namespace deepinfer::sample
