// RoPE / YaRN frequencies and rotation, computed the reference's way (precompute_freqs_cis,
// apply_rotary_emb, model.py:368-406).
#include "ops/rope.h"

#include <algorithm>
#include <cmath>

#include "backend/kernels.h"
#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/elementwise.h"

namespace deepinfer::ops {

Rope::Rope(const RopeParams& p) : rope_dim_(p.rope_dim) {
    DI_CHECK_MSG(p.rope_dim > 0 && p.rope_dim % 2 == 0 && p.rope_dim <= 512, "RoPE needs an even rope_dim <= 512, got {}",
                 p.rope_dim);
    const int half = p.rope_dim / 2;
    freqs_.resize(half);
    for (int i = 0; i < half; ++i) {
        float exponent = static_cast<float>(2 * i) / static_cast<float>(p.rope_dim);
        freqs_[i] = 1.0f / std::pow(static_cast<float>(p.base), exponent);
    }
    if (p.original_seq_len > 0) {
        // The correction dims are computed in double (Python math), the ramp in fp32.
        auto corrected_dim = [&](double rotations) {
            return p.rope_dim * std::log(static_cast<double>(p.original_seq_len) / (rotations * 2 * M_PI)) /
                   (2 * std::log(p.base));
        };
        double low = std::max(std::floor(corrected_dim(p.beta_fast)), 0.0);
        double high = std::min(std::ceil(corrected_dim(p.beta_slow)), static_cast<double>(p.rope_dim - 1));
        float denom = static_cast<float>(std::max(high - low, 1e-3));
        for (int i = 0; i < half; ++i) {
            float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / denom, 0.0f, 1.0f);
            float smooth = 1.0f - ramp;
            // freqs / factor * (1 - smooth) + freqs * smooth, in exactly this fp32 form (spec §4.6).
            float scaled = freqs_[i] / static_cast<float>(p.factor);
            freqs_[i] = scaled * (1.0f - smooth) + freqs_[i] * smooth;
        }
    }
}

void Rope::angles(int64_t pos, float* cos_out, float* sin_out) const {
    const float t = static_cast<float>(pos);
    for (size_t i = 0; i < freqs_.size(); ++i) {
        float phi = t * freqs_[i];  // rounded to fp32 before cos/sin
        cos_out[i] = std::cos(phi);
        sin_out[i] = std::sin(phi);
    }
}

void Rope::apply(bf16* x, int64_t count, int64_t stride, int64_t pos, bool inverse) const {
    float c[256], s[256];
    angles(pos, c, s);
    backend::active_kernels().rope(x, count, stride, rope_dim_, c, s, inverse);
}

void Rope::apply_rows(bf16* x, int64_t n, int64_t row_stride, int64_t count, int64_t stride, const int64_t* positions,
                      bool inverse) const {
    ThreadPool::global().parallel_for(static_cast<size_t>(n), [&](size_t i0, size_t i1, int) {
        for (size_t i = i0; i < i1; ++i) apply(x + i * row_stride, count, stride, positions[i], inverse);
    }, kParallelRows);
}

}  // namespace deepinfer::ops
