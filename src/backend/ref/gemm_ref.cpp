// Scalar reference GEMMs: the definition of the block-scaled fp8 / MXFP4 products (spec §4.3) and of
// the bf16 / fp32 linears. Readable first; rows are split over the pool only so tests run quickly.
#include <algorithm>
#include <array>

#include "backend/ref/ref_kernels.h"

namespace deepinfer::backend::ref {
namespace {

const std::array<float, 256>& e4m3_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i) t[i] = e4m3_to_float(static_cast<uint8_t>(i));
        return t;
    }();
    return table;
}

}  // namespace

void act_quant(const bf16* x, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales, ThreadPool& pool) {
    pool.parallel_for(static_cast<size_t>(n), [&](size_t begin, size_t end, int) {
        float group[kActQuantGroup];
        for (size_t i = begin; i < end; ++i)
            for (int64_t g = 0; g < k / kActQuantGroup; ++g) {
                for (int j = 0; j < kActQuantGroup; ++j) group[j] = bf16_to_float(x[i * k + g * kActQuantGroup + j]);
                scales[i * (k / kActQuantGroup) + g] = act_quant_group(group, codes + i * k + g * kActQuantGroup);
            }
    });
}

namespace {
// The fp8 block GEMM over n activation rows of width k: act(i, kk) is an activation value, act_scale(i, kb)
// its block's scale (1 for unquantized activations).
template <typename Out, typename Act, typename ActScale, typename Store>
void gemm_fp8_impl(int64_t n, int64_t k, const Act& act, const ActScale& act_scale, const Fp8Matrix& w, Out* out,
                   int64_t ldo, ThreadPool& pool, Store store) {
    const auto& lut = e4m3_table();
    const int64_t kb_count = k / 32, scale_cols = (w.cols + 31) / 32;
    pool.parallel_for(static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) {
        for (int64_t i = 0; i < n; ++i)
            for (size_t j = begin; j < end; ++j) {
                float acc = 0.0f;
                for (int64_t kb = 0; kb < kb_count; ++kb) {
                    float partial = 0.0f;
                    for (int64_t kk = kb * 32; kk < kb * 32 + 32; ++kk)
                        partial += act(i, kk) * lut[w.codes[j * w.cols + kk]];
                    float sa = act_scale(i, kb);
                    float sw = e8m0_to_float(w.scales[(j / 32) * scale_cols + kb]);
                    acc += partial * sa * sw;
                }
                out[i * ldo + j] = store(acc);
            }
    });
}

template <typename Out, typename Store>
void gemm_fp8_impl(const Fp8Acts& a, const Fp8Matrix& w, Out* out, int64_t ldo, ThreadPool& pool, Store store) {
    const auto& lut = e4m3_table();
    const int64_t kb_count = a.k / 32;
    gemm_fp8_impl(
        a.n, a.k, [&](int64_t i, int64_t kk) { return lut[a.codes[i * a.k + kk]]; },
        [&](int64_t i, int64_t kb) { return e8m0_to_float(a.scales[i * kb_count + kb]); }, w, out, ldo, pool, store);
}
}  // namespace

void gemm_fp8(const Fp8Acts& a, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    gemm_fp8_impl(a, w, out, ldo, pool, [](float v) { return float_to_bf16(v); });
}

void gemm_fp8_f32(const Fp8Acts& a, const Fp8Matrix& w, float* out, int64_t ldo, ThreadPool& pool) {
    gemm_fp8_impl(a, w, out, ldo, pool, [](float v) { return v; });
}

namespace {
void gemm_fp8_bf16x_strided(const bf16* x, int64_t n, int64_t ldx, const Fp8Matrix& w, bf16* out, int64_t ldo,
                            ThreadPool& pool) {
    gemm_fp8_impl(
        n, w.cols, [&](int64_t i, int64_t kk) { return bf16_to_float(x[i * ldx + kk]); },
        [](int64_t, int64_t) { return 1.0f; }, w, out, ldo, pool, [](float v) { return float_to_bf16(v); });
}
}  // namespace

void gemm_fp8_bf16x(const bf16* x, int64_t n, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    gemm_fp8_bf16x_strided(x, n, w.cols, w, out, ldo, pool);
}

void gemm_fp8_bf16x_grouped(const Fp8Bf16xGemm* gemms, int64_t count, ThreadPool& pool) {
    for (int64_t i = 0; i < count; ++i)
        gemm_fp8_bf16x_strided(gemms[i].x, gemms[i].n, gemms[i].ldx, gemms[i].w, gemms[i].out, gemms[i].ldo, pool);
}

void gemm_fp4(const Fp8Acts& a, const Fp4Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    const auto& lut = e4m3_table();
    const int64_t kb_count = a.k / 32;
    pool.parallel_for(static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) {
        for (int64_t i = 0; i < a.n; ++i)
            for (size_t j = begin; j < end; ++j) {
                float acc = 0.0f;
                const uint8_t* row = w.packed + j * (w.cols / 2);
                for (int64_t kb = 0; kb < kb_count; ++kb) {
                    float partial = 0.0f;
                    for (int64_t kk = kb * 32; kk < kb * 32 + 32; ++kk) {
                        uint8_t code = (row[kk / 2] >> ((kk & 1) * 4)) & 0xf;
                        partial += lut[a.codes[i * a.k + kk]] * e2m1_to_float(code);
                    }
                    float sa = e8m0_to_float(a.scales[i * kb_count + kb]);
                    float sw = e8m0_to_float(w.scales[j * kb_count + kb]);
                    acc += partial * sa * sw;
                }
                out[i * ldo + j] = float_to_bf16(acc);
            }
    });
}

void gemm_bf16(const bf16* x, int64_t n, const Bf16Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    pool.parallel_for(static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) {
        for (int64_t i = 0; i < n; ++i)
            for (size_t j = begin; j < end; ++j) {
                float acc = 0.0f;
                for (int64_t kk = 0; kk < w.cols; ++kk)
                    acc += bf16_to_float(x[i * w.cols + kk]) * bf16_to_float(w.data[j * w.cols + kk]);
                out[i * ldo + j] = float_to_bf16(acc);
            }
    });
}

void gemm_f32_bf16w(const float* x, int64_t n, const Bf16Matrix& w, float* out, int64_t ldo, ThreadPool& pool) {
    pool.parallel_for(static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) {
        for (int64_t i = 0; i < n; ++i)
            for (size_t j = begin; j < end; ++j) {
                float acc = 0.0f;
                for (int64_t kk = 0; kk < w.cols; ++kk) acc += x[i * w.cols + kk] * bf16_to_float(w.data[j * w.cols + kk]);
                out[i * ldo + j] = acc;
            }
    });
}

void gemm_f32(const float* x, int64_t n, const F32Matrix& w, float* out, int64_t ldo, ThreadPool& pool) {
    pool.parallel_for(static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) {
        for (int64_t i = 0; i < n; ++i)
            for (size_t j = begin; j < end; ++j) {
                float acc = 0.0f;
                for (int64_t kk = 0; kk < w.cols; ++kk) acc += x[i * w.cols + kk] * w.data[j * w.cols + kk];
                out[i * ldo + j] = acc;
            }
    });
}

void gemm_f32_squares(const bf16* x, int64_t n, const F32Matrix& w, float* out, float* squares, ThreadPool& pool) {
    pool.parallel_for(static_cast<size_t>(n), [&](size_t begin, size_t end, int) {
        std::vector<float> row(static_cast<size_t>(w.cols));
        for (size_t i = begin; i < end; ++i) {
            float sum = 0.0f;
            for (int64_t kk = 0; kk < w.cols; ++kk) {
                row[kk] = bf16_to_float(x[i * w.cols + kk]);
                sum += row[kk] * row[kk];
            }
            squares[i] = sum;
            for (int64_t j = 0; j < w.rows; ++j) {
                float acc = 0.0f;
                for (int64_t kk = 0; kk < w.cols; ++kk) acc += row[kk] * w.data[j * w.cols + kk];
                out[i * w.rows + j] = acc;
            }
        }
    });
}

}  // namespace deepinfer::backend::ref
