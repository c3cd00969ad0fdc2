// Hyper-connection coefficients (spec §4.8, hc_split_sinkhorn) and the collapse / expansion of the
// 4-copy residual stream (spec §5.2, model.py Block.hc_pre / hc_post).
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace deepinfer::ops {

// mixes fp32 [mix = (2+hc)*hc]; scale [3]; base [mix]. Outputs pre [hc], post [hc], comb [hc*hc] with
// comb[i*hc + j] = weight of input copy i into output copy j.
void hc_split_sinkhorn(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps,
                       float* pre, float* post, float* comb);

// y[k] = bf16( sum_c pre[c] * x[c][k] ) for one row; x bf16 [hc, dim].
void hc_collapse(const bf16* x, const float* pre, int hc, int dim, bf16* y);

// out[j][k] = bf16( post[j] * o[k] + sum_i comb[i][j] * res[i][k] ) for one row.
void hc_expand(const bf16* o, const bf16* res, const float* post, const float* comb, int hc, int dim, bf16* out);

}  // namespace deepinfer::ops
