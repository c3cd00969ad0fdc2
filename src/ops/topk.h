// Top-k selection with the tie behaviour of torch.topk on CPU (the reference runs on torch): the same
// (value, index) queue in index order, the same comparator (NaN first, then greater values) and the same
// algorithm choice (partial_sort when k * 64 <= n, else nth_element, then a sort of the first k - 1 when
// sorted). Used for the MoE router, whose width (the expert count) is fixed; the indexer keeps a fixed
// lower-index rule instead, because torch's choice among ties there depends on the chunking (spec §10.2).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace deepinfer::ops {

// Indices of the k largest of v[0, n), in torch's output order (descending when sorted). `queue` is scratch.
void torch_topk(const float* v, int64_t n, int64_t k, bool sorted, std::vector<std::pair<float, int64_t>>& queue,
                int64_t* out);

}  // namespace deepinfer::ops
