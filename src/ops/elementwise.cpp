// Row-wise ops with the reference's rounding points.
#include "ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/kernels.h"
#include "core/thread_pool.h"

namespace deepinfer::ops {

void rms_norm(const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y) {
    backend::active_kernels().rms_norm(x, n, dim, w, eps, y, ThreadPool::global());
}

void act_qdq_rows(bf16* x, int64_t n, int dim) {
    float group[kActQuantGroup];
    for (int64_t i = 0; i < n; ++i)
        for (int g = 0; g < dim / kActQuantGroup; ++g) {
            bf16* p = x + i * dim + g * kActQuantGroup;
            for (int j = 0; j < kActQuantGroup; ++j) group[j] = bf16_to_float(p[j]);
            act_qdq_group(group);
            for (int j = 0; j < kActQuantGroup; ++j) p[j] = float_to_bf16(group[j]);
        }
}

void bf16_to_f32(const bf16* x, int64_t count, float* y) {
    for (int64_t i = 0; i < count; ++i) y[i] = bf16_to_float(x[i]);
}

void bf16_rows_to_f32(const bf16* x, int64_t n, int64_t width, float* y) {
    ThreadPool::global().parallel_for(static_cast<size_t>(n), [&](size_t i0, size_t i1, int) {
        bf16_to_f32(x + i0 * width, static_cast<int64_t>(i1 - i0) * width, y + i0 * width);
    }, kParallelRows);
}

void f32_to_bf16(const float* x, int64_t count, bf16* y) {
    for (int64_t i = 0; i < count; ++i) y[i] = float_to_bf16(x[i]);
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void swiglu(const bf16* gate, const bf16* up, int64_t n, int inter, float limit, const float* row_weight, bf16* h) {
    backend::active_kernels().swiglu(gate, up, n, inter, limit, row_weight, h, ThreadPool::global());
}

}  // namespace deepinfer::ops
