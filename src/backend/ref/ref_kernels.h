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
void sparse_attn(const bf16* q, int64_t m, int heads, int dim, const bf16* kv, const int32_t* idx, int topk,
                 const float* sink, float scale, bf16* out, ThreadPool& pool);
void index_scores(const bf16* q, int64_t m, int heads, int dim, const bf16* keys, int64_t n, const bf16* w,
                  float* out, int64_t ldo, ThreadPool& pool);

}  // namespace deepinfer::backend::ref
