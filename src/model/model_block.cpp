// One mHC block (spec §5.2): coefficients from the block input, attention on the stream collapsed with
// the incoming pre-mix, expansion; then the same for the FFN with the attention sublayer's pre-mix.
#include <chrono>
#include <cmath>
#include <vector>

#include "core/scratch_pool.h"
#include "core/thread_pool.h"
#include "model/forward_state.h"
#include "ops/elementwise.h"
#include "ops/hyper_connection.h"
#include "ops/linear.h"

namespace deepinfer::model {

void Model::hc_mixes(const bf16* stream, int64_t n, const F32Matrix& fn, const float* scale, const float* base,
                     float* pre, float* post, float* comb) {
    const ModelConfig& c = config_;
    const int hc = c.hc_mult, width = c.hc_dim(), mix = c.hc_mix_dim();
    ScratchVector<float> mixes(n * mix), squares(n);
    // fn . x with the un-normalised stream, and one statistic over all copies jointly (spec §5.2 HC): each row's
    // squares summed in order
    ops::linear_f32_squares(stream, n, fn, mixes.data(), squares.data());
    for (int64_t i = 0; i < n; ++i) {
        const float rstd =
            1.0f / std::sqrt(squares[i] / static_cast<float>(width) + static_cast<float>(c.rms_norm_eps));
        for (int m = 0; m < mix; ++m) mixes[i * mix + m] *= rstd;
    }
    ops::hc_split_sinkhorn(mixes.data(), n, scale, base, hc, c.hc_sinkhorn_iters, static_cast<float>(c.hc_eps), pre, post,
                           comb);
}

void Model::block(Forward& f, int L, bf16* stream, float* pre_in) {
    run_block(L, stream, pre_in, f.n, [&](const bf16* x, bf16* out) { attention(f, L, x, out); });
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void Model::set_profiling(bool on) {
    profiling_ = on;
    profile_ = ForwardProfile{};
    total_profiled_ = 0.0;
    profile_.attention_seconds.assign(config_.n_blocks(), 0.0);
    profile_.moe_seconds.assign(config_.n_blocks(), 0.0);
    profile_.engram_seconds.assign(config_.n_blocks(), 0.0);
    profile_.block_seconds.assign(config_.n_blocks(), 0.0);
}

void Model::run_block(int L, bf16* stream, float* pre_in, int64_t n, const AttentionFn& attend) {
    const auto t_block = std::chrono::steady_clock::now();
    const ModelConfig& c = config_;
    const BlockWeights& w = weights_->blocks[L];
    const int hc = c.hc_mult, D = c.hidden_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    ScratchVector<float> pre_a(n * hc), post_a(n * hc), comb_a(n * hc * hc);
    ScratchVector<float> pre_f(n * hc), post_f(n * hc), comb_f(n * hc * hc);
    ScratchVector<bf16> collapsed(n * D), normed(n * D), sub_out(n * D), next(n * hc * D);

    // Attention sublayer.
    hc_mixes(stream, n, w.hc_attn_fn, w.hc_attn_scale, w.hc_attn_base, pre_a.data(), post_a.data(), comb_a.data());
    ops::hc_collapse(stream, n, pre_in, hc, D, collapsed.data());
    ops::rms_norm(collapsed.data(), n, D, w.attn_norm, eps, normed.data());
    auto t0 = std::chrono::steady_clock::now();
    attend(normed.data(), sub_out.data());
    if (profiling_) profile_.attention_seconds[L] += seconds_since(t0);
    ops::hc_expand(sub_out.data(), stream, n, post_a.data(), comb_a.data(), hc, D, next.data());

    // FFN sublayer: collapse with the attention sublayer's pre-mix ("one sublayer late").
    hc_mixes(next.data(), n, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, pre_f.data(), post_f.data(), comb_f.data());
    ops::hc_collapse(next.data(), n, pre_a.data(), hc, D, collapsed.data());
    ops::rms_norm(collapsed.data(), n, D, w.ffn_norm, eps, normed.data());
    t0 = std::chrono::steady_clock::now();
    moe(L, normed.data(), n, sub_out.data());
    if (profiling_) profile_.moe_seconds[L] += seconds_since(t0);
    ops::hc_expand(sub_out.data(), next.data(), n, post_f.data(), comb_f.data(), hc, D, stream);
    std::copy(pre_f.begin(), pre_f.end(), pre_in);
    if (profiling_) profile_.block_seconds[L] += seconds_since(t_block);
}

}  // namespace deepinfer::model
