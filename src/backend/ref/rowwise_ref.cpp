// Scalar references of the row-wise ops (Kernels::rms_norm ... gather_fp8_rows): the reference's rounding
// points (spec sections cited in kernels.h), plain loops. The SIMD tables compute the same values; where
// they differ (exp) the op harness states the budget (tests/ops/rowwise_test.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/ref/ref_kernels.h"
#include "core/check.h"
#include "core/quant_records.h"

namespace deepinfer::backend::ref {

float rms_sum_squares(const bf16* x, int dim) {
    float lane[16] = {};
    for (int k = 0; k < dim; ++k) {
        const float v = bf16_to_float(x[k]);
        lane[k % 16] += v * v;
    }
    for (int half = 8; half >= 1; half /= 2)
        for (int i = 0; i < half; ++i) lane[i] += lane[i + half];
    return lane[0];
}

void rms_norm(const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y, ThreadPool&) {
    for (int64_t i = 0; i < n; ++i) {
        const bf16* xi = x + i * dim;
        const float r = 1.0f / std::sqrt(rms_sum_squares(xi, dim) / static_cast<float>(dim) + eps);
        for (int k = 0; k < dim; ++k) {
            const float normed = bf16_to_float(xi[k]) * r;  // x * rsqrt(...) first, then w * that (spec §4.1)
            y[i * dim + k] = float_to_bf16(bf16_to_float(w[k]) * normed);
        }
    }
}

void swiglu(const bf16* gate, const bf16* up, int64_t n, int inter, float limit, const float* row_weight, bf16* h,
            ThreadPool&) {
    for (int64_t i = 0; i < n; ++i)
        for (int k = 0; k < inter; ++k) {
            float g = bf16_to_float(gate[i * inter + k]);
            float u = bf16_to_float(up[i * inter + k]);
            if (limit > 0) {
                u = std::clamp(u, -limit, limit);
                g = std::min(g, limit);
            }
            float v = g / (1.0f + std::exp(-g)) * u;
            if (row_weight) v = row_weight[i] * v;  // routing weight before w2 (spec §5.4 step 5)
            h[i * inter + k] = float_to_bf16(v);
        }
}

void rope(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin, bool inverse) {
    for (int64_t v = 0; v < count; ++v) {
        bf16* p = x + v * stride;
        for (int i = 0; i < rope_dim / 2; ++i) {
            const float re = bf16_to_float(p[2 * i]), im = bf16_to_float(p[2 * i + 1]);
            const float c = cos[i], s = inverse ? -sin[i] : sin[i];
            p[2 * i] = float_to_bf16(re * c - im * s);
            p[2 * i + 1] = float_to_bf16(re * s + im * c);
        }
    }
}

void pair_pool(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out) {
    for (int k = 0; k < dim; ++k) {
        const float mx = std::max(g0[k], g1[k]);
        const float e0 = std::exp(g0[k] - mx), e1 = std::exp(g1[k] - mx);
        const float sum = e0 + e1;
        out[k] = float_to_bf16(u0[k] * (e0 / sum) + u1[k] * (e1 / sum));
    }
}

namespace {
// One row of hc_split_sinkhorn, the reference kernel's fp32 operation order.
void sinkhorn_row(const float* m, const float* scale, const float* base, int hc, int iters, float eps, float* pre,
                  float* post, float* C) {
    for (int c = 0; c < hc; ++c) {
        pre[c] = 1.0f / (1.0f + std::exp(-(m[c] * scale[0] + base[c]))) + eps;
        post[c] = 2.0f * (1.0f / (1.0f + std::exp(-(m[hc + c] * scale[1] + base[hc + c]))));
    }
    for (int i = 0; i < hc * hc; ++i) C[i] = m[2 * hc + i] * scale[2] + base[2 * hc + i];
    for (int i = 0; i < hc; ++i) {  // row softmax (over j) + eps
        float mx = C[i * hc];
        for (int j = 1; j < hc; ++j) mx = std::max(mx, C[i * hc + j]);
        float sum = 0.0f;
        for (int j = 0; j < hc; ++j) {
            C[i * hc + j] = std::exp(C[i * hc + j] - mx);
            sum += C[i * hc + j];
        }
        for (int j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / sum + eps;
    }
    auto normalize_columns = [&] {
        for (int j = 0; j < hc; ++j) {
            float sum = 0.0f;
            for (int i = 0; i < hc; ++i) sum += C[i * hc + j];
            for (int i = 0; i < hc; ++i) C[i * hc + j] = C[i * hc + j] / (sum + eps);
        }
    };
    auto normalize_rows = [&] {
        for (int i = 0; i < hc; ++i) {
            float sum = 0.0f;
            for (int j = 0; j < hc; ++j) sum += C[i * hc + j];
            for (int j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / (sum + eps);
        }
    };
    normalize_columns();
    for (int it = 0; it < iters - 1; ++it) {
        normalize_rows();
        normalize_columns();
    }
}
}  // namespace

void hc_sinkhorn(const float* mixes, int64_t n, const float* scale, const float* base, int hc, int iters, float eps,
                 float* pre, float* post, float* comb, ThreadPool&) {
    const int mix = (2 + hc) * hc;
    for (int64_t i = 0; i < n; ++i)
        sinkhorn_row(mixes + i * mix, scale, base, hc, iters, eps, pre + i * hc, post + i * hc, comb + i * hc * hc);
}

void hc_collapse(const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y, ThreadPool&) {
    for (int64_t i = 0; i < n; ++i)
        for (int k = 0; k < dim; ++k) {
            float sum = 0.0f;
            for (int c = 0; c < hc; ++c) sum += pre[i * hc + c] * bf16_to_float(x[(i * hc + c) * dim + k]);
            y[i * dim + k] = float_to_bf16(sum);
        }
}

void hc_expand(const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb, int hc, int dim,
               bf16* out, ThreadPool&) {
    for (int64_t i = 0; i < n; ++i)
        for (int j = 0; j < hc; ++j)
            for (int k = 0; k < dim; ++k) {
                float mixed = 0.0f;
                for (int c = 0; c < hc; ++c)
                    mixed += comb[(i * hc + c) * hc + j] * bf16_to_float(res[(i * hc + c) * dim + k]);
                const float v = post[i * hc + j] * bf16_to_float(o[i * dim + k]) + mixed;
                out[(i * hc + j) * dim + k] = float_to_bf16(v);
            }
}

uint32_t topk_order_key(float v) {
    if (std::isnan(v)) return 0xffffffffu;  // NaN above everything, as torch.topk
    if (v == 0.0f) v = 0.0f;                // -0 ties with +0
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

void topk_entries(const float* scores, int64_t width, int k, int32_t* out) {
    DI_CHECK_LE(static_cast<int64_t>(k), width);
    if (k <= 0) return;
    std::vector<int32_t> order(static_cast<size_t>(width));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        const uint32_t ka = topk_order_key(scores[a]), kb = topk_order_key(scores[b]);
        return ka > kb || (ka == kb && a < b);
    });
    std::sort(order.begin(), order.begin() + k);
    std::copy(order.begin(), order.begin() + k, out);
}

void gather_fp8_rows(const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows, int64_t count,
                     bf16* out, ThreadPool&) {
    for (int64_t i = 0; i < count; ++i) {
        const uint8_t* q = codes + rows[i] * dim;
        const uint8_t* s = scales + rows[i] * (dim / 32);
        for (int k = 0; k < dim; ++k) {
            const float scale = e8m0_to_float(s[k / 32]);  // NaN: the group is that NaN (core/quant_records.cpp)
            out[i * dim + k] = float_to_bf16(scale != scale ? scale : e4m3_to_float(q[k]) * scale);
        }
    }
}

// The records' definition itself (core/quant_records.cpp).
void unpack_records(CacheRecord kind, const uint8_t* const* records, int64_t count, int dim, bf16* out, ThreadPool&) {
    for (int64_t r = 0; r < count; ++r) {
        switch (kind) {
            case CacheRecord::kWindow: unpack_window_record(records[r], dim, out + r * dim); break;
            case CacheRecord::kCompressed: unpack_compressed_record(records[r], dim, out + r * dim); break;
            case CacheRecord::kIndexKey: unpack_index_key_record(records[r], dim, out + r * dim); break;
        }
    }
}

}  // namespace deepinfer::backend::ref
