// Sinkhorn coefficients and stream collapse / expansion, same fp32 operation order as the reference.
#include "ops/hyper_connection.h"

#include <algorithm>
#include <bit>
#include <type_traits>
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

// The stream ops run over blocks of columns with the copy loop outside, so the compiler vectorizes them; each
// output still sums its terms in the reference's order (from 0, copy by copy), bit for bit.
namespace {
constexpr int kColumnBlock = 256;
// float_to_bf16 without a branch (the same bits: NaN quieted, round to nearest even), so the loops vectorize.
inline uint16_t to_bf16_bits(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}
inline float widen(bf16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }
}  // namespace

namespace {
// Columns [k0, k0 + m) of one row; m is a compile-time constant for whole blocks (the release build's -O2
// vectorizes only loops of known trip count) and a plain int for the tail.
template <class Count>
void collapse_columns(const bf16* x, const float* pre, int hc, int dim, int k0, Count m, bf16* y) {
    float sum[kColumnBlock];
    for (int k = 0; k < m; ++k) sum[k] = 0.0f;
    for (int c = 0; c < hc; ++c) {
        const float p = pre[c];
        const bf16* xc = x + static_cast<int64_t>(c) * dim + k0;
        for (int k = 0; k < m; ++k) sum[k] += p * widen(xc[k]);
    }
    for (int k = 0; k < m; ++k) y[k0 + k].bits = to_bf16_bits(sum[k]);
}

template <class Count>
void expand_columns(const bf16* o, const bf16* res, float post_j, const float* comb_j, int hc, int dim, int k0,
                    Count m, bf16* out_j) {
    float mixed[kColumnBlock];
    for (int k = 0; k < m; ++k) mixed[k] = 0.0f;
    for (int i = 0; i < hc; ++i) {
        const float w = comb_j[i * hc];
        const bf16* ri = res + static_cast<int64_t>(i) * dim + k0;
        for (int k = 0; k < m; ++k) mixed[k] += w * widen(ri[k]);
    }
    for (int k = 0; k < m; ++k) out_j[k0 + k].bits = to_bf16_bits(post_j * widen(o[k0 + k]) + mixed[k]);
}

using WholeBlock = std::integral_constant<int, kColumnBlock>;
}  // namespace

void hc_collapse(const bf16* x, const float* pre, int hc, int dim, bf16* y) {
    int k0 = 0;
    for (; k0 + kColumnBlock <= dim; k0 += kColumnBlock) collapse_columns(x, pre, hc, dim, k0, WholeBlock{}, y);
    if (k0 < dim) collapse_columns(x, pre, hc, dim, k0, dim - k0, y);
}

void hc_expand(const bf16* o, const bf16* res, const float* post, const float* comb, int hc, int dim, bf16* out) {
    for (int j = 0; j < hc; ++j) {
        bf16* out_j = out + static_cast<int64_t>(j) * dim;
        int k0 = 0;
        for (; k0 + kColumnBlock <= dim; k0 += kColumnBlock)
            expand_columns(o, res, post[j], comb + j, hc, dim, k0, WholeBlock{}, out_j);
        if (k0 < dim) expand_columns(o, res, post[j], comb + j, hc, dim, k0, dim - k0, out_j);
    }
}

}  // namespace deepinfer::ops
