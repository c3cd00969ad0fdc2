// mHC ops: the active kernel table's entries on the global pool.
#include "ops/hyper_connection.h"

#include "backend/kernels.h"

namespace deepinfer::ops {

void hc_split_sinkhorn(const float* mixes, int64_t n, const float* scale, const float* base, int hc, int iters,
                       float eps, float* pre, float* post, float* comb) {
    backend::active_kernels().hc_sinkhorn(mixes, n, scale, base, hc, iters, eps, pre, post, comb,
                                          ThreadPool::global());
}

void hc_collapse(const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y) {
    backend::active_kernels().hc_collapse(x, n, pre, hc, dim, y, ThreadPool::global());
}

void hc_expand(const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb, int hc, int dim,
               bf16* out) {
    backend::active_kernels().hc_expand(o, res, n, post, comb, hc, dim, out, ThreadPool::global());
}

}  // namespace deepinfer::ops
