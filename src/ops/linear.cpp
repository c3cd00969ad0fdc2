// Linear dispatch: act_quant into thread-local scratch, then the GEMM of the active kernel table.
#include "ops/linear.h"

#include <fmt/format.h>

#include "core/aligned_buffer.h"
#include "core/check.h"
#include "core/scratch_pool.h"
#include "ops/op_profile.h"

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

// Weight bytes a GEMM reads (codes and scales), for the op profile.
double fp8_bytes(int64_t rows, int64_t cols) {
    return static_cast<double>(rows) * cols + static_cast<double>((rows + 31) / 32) * ((cols + 31) / 32);
}
double fp4_bytes(int64_t rows, int64_t cols) { return static_cast<double>(rows) * cols * (0.5 + 1.0 / 32); }

double gemm_flops(int64_t rows, int64_t cols, int64_t n) { return 2.0 * static_cast<double>(rows) * cols * n; }

// "kind RxC nN" for one GEMM; "kind grouped Gx RxC nN" (or "mixed shapes") for several.
template <class Each>
OpTimer timed_group(const char* kind, int64_t count, Each&& each) {
    return OpTimer([&](OpCall& call) {
        int64_t rows = -1, cols = -1, n = -1;
        bool same = true;
        for (int64_t i = 0; i < count; ++i) {
            int64_t r, c, ni;
            call.bytes += each(i, r, c, ni);
            call.flops += gemm_flops(r, c, ni);
            if (i > 0 && (r != rows || c != cols || ni != n)) same = false;
            rows = r, cols = c, n = ni;
        }
        call.name = same ? fmt::format("{} grouped {}x {}x{} n{}", kind, count, rows, cols, n)
                         : fmt::format("{} grouped {}x mixed shapes", kind, count);
    });
}
// fp32_math: the kernels multiply in fp32 (their roofline is the FMA peak, bench-decode --op-profile)
OpTimer timed(const char* kind, int64_t rows, int64_t cols, int64_t n, double bytes, bool fp32_math = false) {
    return OpTimer([&](OpCall& call) {
        call.name = fmt::format("{} {}x{} n{}", kind, rows, cols, n);
        call.bytes = bytes;
        call.flops = gemm_flops(rows, cols, n);
        call.fp32_math = fp32_math;
    });
}

}  // namespace

void linear_fp8(const bf16* x, int64_t n, const Fp8Matrix& w, bf16* y) {
    if (n == 0) return;
    const OpTimer timer = timed("fp8", w.rows, w.cols, n, fp8_bytes(w.rows, w.cols));
    auto a = quantize(x, n, w.cols);
    backend::active_kernels().gemm_fp8(a, w, y, w.rows, ThreadPool::global());
}

void linear_fp8_f32(const bf16* x, int64_t n, const Fp8Matrix& w, float* y) {
    if (n == 0) return;
    const OpTimer timer = timed("fp8->f32", w.rows, w.cols, n, fp8_bytes(w.rows, w.cols));
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
    const OpTimer timer = timed_group("fp8 (bf16 x)", static_cast<int64_t>(gemms.size()),
                                      [&](int64_t i, int64_t& r, int64_t& c, int64_t& n) {
                                          r = gemms[i].w.rows, c = gemms[i].w.cols, n = gemms[i].n;
                                          return fp8_bytes(r, c);
                                      });
    backend::active_kernels().gemm_fp8_bf16x_grouped(gemms.data(), static_cast<int64_t>(gemms.size()),
                                                     ThreadPool::global());
}

void linear_fp4(const bf16* x, int64_t n, const Fp4Matrix& w, bf16* y) {
    if (n == 0) return;
    const OpTimer timer = timed("fp4", w.rows, w.cols, n, fp4_bytes(w.rows, w.cols));
    auto a = quantize(x, n, w.cols);
    backend::active_kernels().gemm_fp4(a, w, y, w.rows, ThreadPool::global());
}

void linear_fp4_grouped(const std::vector<Fp4Linear>& linears) {
    const OpTimer timer = timed_group("fp4", static_cast<int64_t>(linears.size()),
                                      [&](int64_t i, int64_t& r, int64_t& c, int64_t& n) {
                                          r = linears[i].w->rows, c = linears[i].w->cols, n = linears[i].n;
                                          return n > 0 ? fp4_bytes(r, c) : 0.0;
                                      });
    // act_quant of each distinct input, into buffers owned by this call (the scratch holds one input)
    std::vector<ScratchVector<uint8_t>> codes, scales;
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
    const OpTimer timer = timed("bf16", w.rows, w.cols, n, 2.0 * w.rows * w.cols);
    backend::active_kernels().gemm_bf16(x, n, w, y, w.rows, ThreadPool::global());
}

void linear_f32(const float* x, int64_t n, const Bf16Matrix& w, float* y) {
    if (n == 0) return;
    const OpTimer timer = timed("f32 x bf16", w.rows, w.cols, n, 2.0 * w.rows * w.cols, true);
    backend::active_kernels().gemm_f32_bf16w(x, n, w, y, w.rows, ThreadPool::global());
}

void linear_f32_squares(const bf16* x, int64_t n, const F32Matrix& w, float* y, float* squares) {
    if (n == 0) return;
    const OpTimer timer = timed("f32 (bf16 x, squares)", w.rows, w.cols, n, 4.0 * w.rows * w.cols, true);
    backend::active_kernels().gemm_f32_squares(x, n, w, y, squares, ThreadPool::global());
}

}  // namespace deepinfer::ops
