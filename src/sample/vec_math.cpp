// Vectorisable reductions (see vec_math.h): 8 independent lanes, combined in a fixed order at the end.
#include "sample/vec_math.h"

#include <limits>

namespace deepinfer::sample {

namespace {
constexpr size_t kLanes = 8;

double combine(const double (&acc)[kLanes]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
}  // namespace

float max_value(std::span<const float> values) {
    const float kNegInf = -std::numeric_limits<float>::infinity();
    float lane[kLanes];
    for (float& l : lane) l = kNegInf;
    const size_t n = values.size(), body = n - n % kLanes;
    for (size_t i = 0; i < body; i += kLanes)
        for (size_t j = 0; j < kLanes; ++j) lane[j] = values[i + j] > lane[j] ? values[i + j] : lane[j];
    float m = kNegInf;
    for (float l : lane) m = l > m ? l : m;
    for (size_t i = body; i < n; ++i) m = values[i] > m ? values[i] : m;
    return m;
}

double sum_double(std::span<const float> values) {
    double acc[kLanes] = {};
    const size_t n = values.size(), body = n - n % kLanes;
    for (size_t i = 0; i < body; i += kLanes)
        for (size_t j = 0; j < kLanes; ++j) acc[j] += values[i + j];
    for (size_t i = body; i < n; ++i) acc[i - body] += values[i];
    return combine(acc);
}

double sum_exp_double(std::span<const float> values, float shift) {
    double acc[kLanes] = {};
    const size_t n = values.size(), body = n - n % kLanes;
    for (size_t i = 0; i < body; i += kLanes)
        for (size_t j = 0; j < kLanes; ++j) acc[j] += exp_nonpositive(values[i + j] - shift);
    for (size_t i = body; i < n; ++i) acc[i - body] += exp_nonpositive(values[i] - shift);
    return combine(acc);
}

}  // namespace deepinfer::sample
