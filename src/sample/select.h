// Selection of the k-th largest value without sorting: the threshold behind top-k and top logprobs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::sample {

// The k-th largest of values, counting repeats (so every value >= the result is among the k largest or tied
// with the k-th). values: no NaN (callers map NaN to -inf); 1 <= k <= values.size() (checked). buffer is
// working memory. For k up to values.size() / 16: one pass keeping a min-heap of the k largest so far,
// testing 8 values at a time against the heap's minimum (vectorised), so typical cost is one streaming pass
// plus O(k log k log(n / k)) heap work; otherwise nth_element on a copy, O(n).
float kth_largest(std::span<const float> values, size_t k, std::vector<float>& buffer);

}  // namespace deepinfer::sample
