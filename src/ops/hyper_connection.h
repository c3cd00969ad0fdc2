// Hyper-connection coefficients (spec §4.8, hc_split_sinkhorn) and the collapse / expansion of the
// 4-copy residual stream (spec §5.2, model.py Block.hc_pre / hc_post), over n rows, through the active
// kernel table (backend/kernels.h states the exact semantics).
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace deepinfer::ops {

// mixes fp32 [n, mix = (2+hc)*hc]; scale [3]; base [mix]. Outputs pre [n, hc], post [n, hc], comb [n, hc*hc]
// with comb[i*hc + j] = weight of input copy i into output copy j.
void hc_split_sinkhorn(const float* mixes, int64_t n, const float* scale, const float* base, int hc, int iters,
                       float eps, float* pre, float* post, float* comb);

// y[i][k] = bf16( sum_c pre[i][c] * x[i][c][k] ); x bf16 [n, hc, dim], y [n, dim].
void hc_collapse(const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y);

// out[i][j][k] = bf16( post[i][j] * o[i][k] + sum_c comb[i][c][j] * res[i][c][k] ); o [n, dim], res / out
// [n, hc, dim].
void hc_expand(const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb, int hc, int dim,
               bf16* out);

}  // namespace deepinfer::ops
