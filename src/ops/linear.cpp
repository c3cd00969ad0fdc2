// Linear dispatch: act_quant into thread-local scratch, then the GEMM of the active kernel table.
#include "ops/linear.h"

#include "core/aligned_buffer.h"
#include "core/check.h"

namespace deepinfer::ops {
namespace {

struct QuantScratch {
    AlignedBuffer codes, scales;
};
QuantScratch& scratch() {
    thread_local QuantScratch s;
    return s;
}

backend::Fp8Acts quantize(const bf16* x, int64_t n, int64_t k) {
    DI_CHECK_MSG(k % kActQuantGroup == 0, "act_quant needs k % 32 == 0, got {}", k);
    auto& s = scratch();
    s.codes.ensure(static_cast<size_t>(n * k));
    s.scales.ensure(static_cast<size_t>(n * k / kActQuantGroup));
    backend::active_kernels().act_quant(x, n, k, s.codes.data(), s.scales.data(), ThreadPool::global());
    return {s.codes.data(), s.scales.data(), n, k};
}

}  // namespace

void linear_fp8(const bf16* x, int64_t n, const Fp8Matrix& w, bf16* y) {
    if (n == 0) return;
    auto a = quantize(x, n, w.cols);
    backend::active_kernels().gemm_fp8(a, w, y, w.rows, ThreadPool::global());
}

void linear_fp8_f32(const bf16* x, int64_t n, const Fp8Matrix& w, float* y) {
    if (n == 0) return;
    auto a = quantize(x, n, w.cols);
    const auto& k = backend::active_kernels();
    (k.gemm_fp8_f32 ? k.gemm_fp8_f32 : backend::ref::kernels().gemm_fp8_f32)(a, w, y, w.rows, ThreadPool::global());
}

void linear_fp8_bf16x_grouped(const std::vector<backend::Fp8Bf16xGemm>& gemms) {
    for (const backend::Fp8Bf16xGemm& g : gemms)
        DI_CHECK_MSG(g.w.cols % 32 == 0 && g.ldx >= g.w.cols && g.ldo >= g.w.rows,
                     "fp8 GEMM of {} x {} (x stride {}, out stride {}): cols must be a multiple of 32, strides cover "
                     "the row",
                     g.w.rows, g.w.cols, g.ldx, g.ldo);
    if (gemms.empty()) return;
    backend::active_kernels().gemm_fp8_bf16x_grouped(gemms.data(), static_cast<int64_t>(gemms.size()),
                                                     ThreadPool::global());
}

void linear_fp4(const bf16* x, int64_t n, const Fp4Matrix& w, bf16* y) {
    if (n == 0) return;
    auto a = quantize(x, n, w.cols);
    backend::active_kernels().gemm_fp4(a, w, y, w.rows, ThreadPool::global());
}

void linear_fp4_grouped(const std::vector<Fp4Linear>& linears) {
    // act_quant of each distinct input, into buffers owned by this call (the scratch holds one input)
    std::vector<std::vector<uint8_t>> codes, scales;
    std::vector<backend::Fp4Gemm> gemms;
    gemms.reserve(linears.size());
    const bf16* last = nullptr;
    for (const Fp4Linear& l : linears) {
        const int64_t k = l.w->cols;
        DI_CHECK_MSG(k % kActQuantGroup == 0, "act_quant needs k % 32 == 0, got {}", k);
        if (l.n == 0) continue;
        if (l.x != last || gemms.empty() || gemms.back().a.n != l.n || gemms.back().a.k != k) {
            codes.emplace_back(static_cast<size_t>(l.n * k));
            scales.emplace_back(static_cast<size_t>(l.n * k / kActQuantGroup));
            backend::active_kernels().act_quant(l.x, l.n, k, codes.back().data(), scales.back().data(),
                                                ThreadPool::global());
            last = l.x;
        }
        gemms.push_back({{codes.back().data(), scales.back().data(), l.n, k}, *l.w, l.y, l.w->rows});
    }
    if (gemms.empty()) return;
    backend::active_kernels().gemm_fp4_grouped(gemms.data(), static_cast<int64_t>(gemms.size()), ThreadPool::global());
}

void linear_bf16(const bf16* x, int64_t n, const Bf16Matrix& w, bf16* y) {
    if (n == 0) return;
    backend::active_kernels().gemm_bf16(x, n, w, y, w.rows, ThreadPool::global());
}

void linear_f32(const float* x, int64_t n, const Bf16Matrix& w, float* y) {
    if (n == 0) return;
    backend::active_kernels().gemm_f32_bf16w(x, n, w, y, w.rows, ThreadPool::global());
}

void linear_f32(const float* x, int64_t n, const F32Matrix& w, float* y) {
    if (n == 0) return;
    backend::active_kernels().gemm_f32(x, n, w, y, w.rows, ThreadPool::global());
}

}  // namespace deepinfer::ops
