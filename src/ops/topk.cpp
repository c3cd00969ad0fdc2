// torch.topk (CPU) selection semantics.
#include "ops/topk.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::ops {

void torch_topk(const float* v, int64_t n, int64_t k, bool sorted, std::vector<std::pair<float, int64_t>>& queue,
                int64_t* out) {
    if (k <= 0) return;
    queue.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) queue[j] = {v[j], j};
    auto comp = [](const std::pair<float, int64_t>& x, const std::pair<float, int64_t>& y) {
        return (std::isnan(x.first) && !std::isnan(y.first)) || (x.first > y.first);
    };
    if (k * 64 <= n) {
        std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), comp);
    } else {
        std::nth_element(queue.begin(), queue.begin() + (k - 1), queue.end(), comp);
        if (sorted) std::sort(queue.begin(), queue.begin() + (k - 1), comp);
    }
    for (int64_t i = 0; i < k; ++i) out[i] = queue[i].second;
}

}  // namespace deepinfer::ops
