// Sinkhorn coefficients and stream collapse / expansion, same fp32 operation order as the reference.
#include "ops/hyper_connection.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::ops {

void hc_split_sinkhorn(const float* m, const float* scale, const float* base, int hc, int iters, float eps,
                       float* pre, float* post, float* comb) {
    for (int c = 0; c < hc; ++c) {
        pre[c] = 1.0f / (1.0f + std::exp(-(m[c] * scale[0] + base[c]))) + eps;
        post[c] = 2.0f * (1.0f / (1.0f + std::exp(-(m[hc + c] * scale[1] + base[hc + c]))));
    }
    float* C = comb;
    for (int i = 0; i < hc * hc; ++i) C[i] = m[2 * hc + i] * scale[2] + base[2 * hc + i];
    // Row softmax (over j) + eps.
    for (int i = 0; i < hc; ++i) {
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

void hc_collapse(const bf16* x, const float* pre, int hc, int dim, bf16* y) {
    for (int k = 0; k < dim; ++k) {
        float sum = 0.0f;
        for (int c = 0; c < hc; ++c) sum += pre[c] * bf16_to_float(x[c * dim + k]);
        y[k] = float_to_bf16(sum);
    }
}

void hc_expand(const bf16* o, const bf16* res, const float* post, const float* comb, int hc, int dim, bf16* out) {
    for (int j = 0; j < hc; ++j)
        for (int k = 0; k < dim; ++k) {
            float mixed = 0.0f;
            for (int i = 0; i < hc; ++i) mixed += comb[i * hc + j] * bf16_to_float(res[i * dim + k]);
            out[j * dim + k] = float_to_bf16(post[j] * bf16_to_float(o[k]) + mixed);
        }
}

}  // namespace deepinfer::ops
