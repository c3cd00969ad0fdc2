// Scalar reference kernels (backend/ref): the semantics every ISA path is tested against.
#pragma once

#include "backend/kernels.h"

namespace deepinfer::backend::ref {

void act_quant(const bf16* x, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales, ThreadPool& pool);
void gemm_fp8(const Fp8Acts& a, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
void gemm_fp8_f32(const Fp8Acts& a, const Fp8Matrix& w, float* out, int64_t ldo, ThreadPool& pool);
void gemm_fp8_bf16x(const bf16* x, int64_t n, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
void gemm_fp8_bf16x_grouped(const Fp8Bf16xGemm* gemms, int64_t count, ThreadPool& pool);
void gemm_fp4(const Fp8Acts& a, const Fp4Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
void gemm_bf16(const bf16* x, int64_t n, const Bf16Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
void gemm_f32_bf16w(const float* x, int64_t n, const Bf16Matrix& w, float* out, int64_t ldo, ThreadPool& pool);
void gemm_f32(const float* x, int64_t n, const F32Matrix& w, float* out, int64_t ldo, ThreadPool& pool);
void gemm_f32_squares(const bf16* x, int64_t n, const F32Matrix& w, float* out, float* squares, ThreadPool& pool);
void sparse_attn(const bf16* q, int64_t m, int heads, int dim, const bf16* kv, const int32_t* idx, int topk,
                 const float* sink, float scale, bf16* out, ThreadPool& pool);
void index_scores(const bf16* q, int64_t m, int heads, int dim, const bf16* keys, int64_t n, const bf16* w,
                  float* out, int64_t ldo, ThreadPool& pool);
void index_scores_fp4(const uint8_t* q_records, int64_t m, int heads, int dim, const uint8_t* const* key_records,
                      int64_t n, const bf16* w, float* out, int64_t ldo, ThreadPool& pool);

void rms_norm(const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y, ThreadPool& pool);
void swiglu(const bf16* gate, const bf16* up, int64_t n, int inter, float limit, const float* row_weight, bf16* h,
            ThreadPool& pool);
void rope(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin, bool inverse);
void pair_pool(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out);
void hc_sinkhorn(const float* mixes, int64_t n, const float* scale, const float* base, int hc, int iters, float eps,
                 float* pre, float* post, float* comb, ThreadPool& pool);
void hc_collapse(const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y, ThreadPool& pool);
void hc_expand(const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb, int hc, int dim,
               bf16* out, ThreadPool& pool);
void topk_entries(const float* scores, int64_t width, int k, int32_t* out);
void gather_fp8_rows(const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows, int64_t count,
                     bf16* out, ThreadPool& pool);
void unpack_records(CacheRecord kind, const uint8_t* const* records, int64_t count, int dim, bf16* out,
                    ThreadPool& pool);

// The sum of squares of one RMSNorm row in Kernels::rms_norm's order (16 lanes, halving).
float rms_sum_squares(const bf16* x, int dim);
// topk_entries' total order as an unsigned key: larger key = better; NaN highest, -0 = +0.
uint32_t topk_order_key(float v);

}  // namespace deepinfer::backend::ref
