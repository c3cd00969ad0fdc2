// Small row-wise ops of the forward pass with the reference's rounding points: RMSNorm (spec §4.1),
// the fp8 / fp4 QDQ of cached vectors (§4.2, §4.4), SwiGLU with clamps (§5.4), conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/numeric.h"

namespace deepinfer::ops {

// Row loops of the forward outside the kernels run over the global thread pool from this many rows (a prefill
// chunk's; serial they kept the pool's other threads waiting); fewer rows (a decode step's) stay on the caller.
// Callers must not be pool tasks themselves (ThreadPool::parallel_for is not reentrant).
constexpr size_t kParallelRows = 16;

// y = bf16(w * (x * rsqrt(mean(x^2) + eps))) per row of x [n, dim] (fp32 math from bf16 inputs); the active
// kernel table's rms_norm (backend/kernels.h: the order of the sum).
void rms_norm(const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y);
// fp8 QDQ in place over every group of 32 of each row (window KV, spec §5.3.2).
void act_qdq_rows(bf16* x, int64_t n, int dim);

void bf16_to_f32(const bf16* x, int64_t count, float* y);
// bf16_to_f32 of x [n, width], rows over the pool (kParallelRows).
void bf16_rows_to_f32(const bf16* x, int64_t n, int64_t width, float* y);
void f32_to_bf16(const float* x, int64_t count, bf16* y);

// SwiGLU with the V4.1 clamps (model.py Expert.forward): up clamped to [-limit, limit], gate to <= limit,
// h = silu(gate) * up, optionally times a per-row routing weight; returns bf16 h [n, inter].
// gate/up are bf16 [n, inter] GEMM outputs. The active kernel table's swiglu.
void swiglu(const bf16* gate, const bf16* up, int64_t n, int inter, float limit, const float* row_weight, bf16* h);

float sigmoid(float x);
// torch softplus (beta 1, threshold 20).
float softplus(float x);

}  // namespace deepinfer::ops
