// Linear layers with the reference's rounding points (spec §3.4 table, §4.2-§4.3): shape checks and
// dispatch to the active kernel table. Activations are row-major [n, k]; weights [m, k].
#pragma once

#include <vector>

#include "backend/kernels.h"

namespace deepinfer::ops {

using backend::Bf16Matrix;
using backend::F32Matrix;
using backend::Fp4Matrix;
using backend::Fp8Matrix;

// bf16 x [n, k] -> act_quant (fp8 per 1x32, power-of-two scales) -> block-scaled GEMM -> bf16 y [n, m].
void linear_fp8(const bf16* x, int64_t n, const Fp8Matrix& w, bf16* y);
// linear_fp8 with fp32 output (no bf16 rounding): row-parallel partial sums under tensor parallelism.
void linear_fp8_f32(const bf16* x, int64_t n, const Fp8Matrix& w, float* y);
// bf16 x [n, k] against fp8 weights without act_quant: the bf16 linear on the weight dequantized to bf16
// (wo_a, spec §3.4 step 4), computed from the fp8 codes (exact products; fp32 sums per 32-column block).
// Several such GEMMs in one kernel dispatch (wo_a's output groups; strided x and y allowed), each with the
// results it would have alone (Kernels::gemm_fp8_bf16x).
void linear_fp8_bf16x_grouped(const std::vector<backend::Fp8Bf16xGemm>& gemms);
// Same with MXFP4 weights (routed experts).
void linear_fp4(const bf16* x, int64_t n, const Fp4Matrix& w, bf16* y);
// Several linear_fp4 at once (a step's routed experts): y = x W^T for each, with linear_fp4's results; one
// kernel dispatch for all of them. Entries with the same x (w1 and w3 of an expert) quantize it once.
struct Fp4Linear {
    const bf16* x;  // [n, w->cols]
    int64_t n;
    const Fp4Matrix* w;
    bf16* y;  // [n, w->rows]
};
void linear_fp4_grouped(const std::vector<Fp4Linear>& linears);
// bf16 x bf16 -> bf16 (fp32 accumulation), torch F.linear on bf16 tensors.
void linear_bf16(const bf16* x, int64_t n, const Bf16Matrix& w, bf16* y);
// fp32 x [n, k] times a bf16-stored weight held in fp32 -> fp32 y (LM head, router, ratio-2 compressor).
void linear_f32(const float* x, int64_t n, const Bf16Matrix& w, float* y);
// bf16 x (exactly widened to fp32) times an fp32 weight -> fp32 y [n, w.rows], and each row's sum of squares x . x
// beside it, squares [n] (the hyper-connection mixes and their statistic, spec §5.2).
void linear_f32_squares(const bf16* x, int64_t n, const F32Matrix& w, float* y, float* squares);

}  // namespace deepinfer::ops
