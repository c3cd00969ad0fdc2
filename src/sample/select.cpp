// kth_largest: streaming min-heap with a vectorised 8-wide rejection test (see select.h).
#include "sample/select.h"

#include <algorithm>
#include <functional>

#include "core/check.h"

namespace deepinfer::sample {

float kth_largest(std::span<const float> values, size_t k, std::vector<float>& buffer) {
    const size_t n = values.size();
    DI_CHECK_MSG(k >= 1 && k <= n, "k = {} of {} values", k, n);
    if (k > n / 16) {
        buffer.assign(values.begin(), values.end());
        std::nth_element(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(k - 1), buffer.end(),
                         std::greater<float>());
        return buffer[k - 1];
    }

    // buffer is a min-heap (std::greater) of the k largest values seen; its front is the current answer.
    buffer.assign(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k));
    std::make_heap(buffer.begin(), buffer.end(), std::greater<float>());
    float floor = buffer.front();
    auto offer = [&](float x) {
        if (!(x > floor)) return;
        std::pop_heap(buffer.begin(), buffer.end(), std::greater<float>());
        buffer.back() = x;
        std::push_heap(buffer.begin(), buffer.end(), std::greater<float>());
        floor = buffer.front();
    };
    constexpr size_t kWidth = 8;
    size_t i = k;
    for (; i + kWidth <= n; i += kWidth) {
        bool any = false;
        for (size_t j = 0; j < kWidth; ++j) any |= values[i + j] > floor;
        if (!any) continue;  // the common case once the heap holds large values
        for (size_t j = 0; j < kWidth; ++j) offer(values[i + j]);
    }
    for (; i < n; ++i) offer(values[i]);
    return floor;
}

}  // namespace deepinfer::sample
