// Model::forward: Engram hashes, embedding, the 4-copy stream through every block, final collapse, norm
// and fp32 head (spec §5.1), and the DSpark ring records of every row (spec §7.2 step 3).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/check.h"
#include "core/scratch_pool.h"
#include "model/forward_state.h"
#include "ops/elementwise.h"
#include "ops/hyper_connection.h"
#include "ops/linear.h"

namespace deepinfer::model {

Status Model::forward(kv::KvPools& pools, const ForwardBatch& batch, ForwardOutput* out) {
    const ModelConfig& c = config_;
    const int D = c.hidden_size, hc = c.hc_mult;
    if (!comm_status_.is_ok()) return comm_status_;
    const auto t_start = std::chrono::steady_clock::now();
    Forward f(pools, batch);
    f.n = static_cast<int64_t>(batch.tokens.size());
    f.positions.resize(f.n);
    f.seqs.resize(batch.seqs.size());
    int64_t covered = 0;
    for (const SeqChunk& s : batch.seqs) {
        if (s.row_begin != covered || s.n_rows <= 0)
            return invalid_argument("forward batch: chunks must cover the rows contiguously in order");
        if (s.cache == nullptr || s.cache->length() != s.start_pos)
            return invalid_argument("forward batch: chunk at position {} but its cache holds {} positions", s.start_pos,
                                    s.cache ? s.cache->length() : -1);
        const int64_t T = layout_.block_tokens;
        if (static_cast<int64_t>(s.cache->window_blocks().size()) * T < s.start_pos + s.n_rows)
            return invalid_argument("forward batch: no cache blocks for positions up to {}", s.start_pos + s.n_rows);
        for (int32_t r = 0; r < s.n_rows; ++r) f.positions[s.row_begin + r] = s.start_pos + r;
        covered += s.n_rows;
    }
    if (covered != f.n) return invalid_argument("forward batch: chunks cover {} of {} rows", covered, f.n);
    for (int32_t t : batch.tokens)
        if (t < 0 || t >= c.vocab_size) return invalid_argument("token id {} is outside the vocabulary [0, {})", t, c.vocab_size);
    for (int32_t r : batch.logit_rows)
        if (r < 0 || r >= f.n) return invalid_argument("logit row {} is outside the batch", r);

    // 1. Engram row ids of every row (spec §5.5.1), from the compressed ids of positions t-3..t.
    if (!c.engram_layer_ids.empty()) {
        const int cols = engram_layout_.n_cols, nmax = c.engram_max_ngram_size;
        f.engram_row_ids.assign(c.engram_layer_ids.size(), std::vector<int64_t>(f.n * cols));
        for (const SeqChunk& s : batch.seqs) {
            for (int32_t r = 0; r < s.n_rows; ++r) {
                const int64_t t = s.start_pos + r;
                auto history = [&](int shift) -> int32_t {
                    int64_t p = t - shift;
                    if (p >= s.start_pos) return token_map_[batch.tokens[s.row_begin + (p - s.start_pos)]];
                    int64_t back = s.start_pos - p;  // 1 = the position just before the chunk
                    int64_t idx = static_cast<int64_t>(s.history.size()) - back;
                    DI_CHECK_MSG(idx >= 0, "chunk at {} lacks {} history tokens", s.start_pos, nmax - 1);
                    return token_map_[s.history[idx]];
                };
                for (size_t l = 0; l < c.engram_layer_ids.size(); ++l)
                    engram_row_ids(engram_layout_, static_cast<int>(l), t, engram_pad_cid_, history,
                                   f.engram_row_ids[l].data() + (s.row_begin + r) * cols);
            }
        }
    }

    // 2-3. Embedding, expanded to hc identical copies; the incoming pre-mix is one-hot (model.py:1159).
    AlignedBuffer stream_buf(static_cast<size_t>(f.n) * hc * D * sizeof(bf16));
    bf16* stream = stream_buf.as<bf16>();  // [n, hc, D]
    for (int64_t i = 0; i < f.n; ++i) {
        const bf16* e = weights_->embed + static_cast<int64_t>(batch.tokens[i]) * D;
        for (int cpy = 0; cpy < hc; ++cpy) std::memcpy(stream + (i * hc + cpy) * D, e, D * sizeof(bf16));
    }
    ScratchVector<float> pre_in(f.n * hc, 0.0f);
    for (int64_t i = 0; i < f.n; ++i) pre_in[i * hc] = 1.0f;

    const int n_targets = static_cast<int>(c.dspark_target_layer_ids.size());
    const bool need_taps = (batch.want_main_hidden || batch.dspark_rings) && c.has_dspark();
    if (need_taps) f.taps.assign(f.n * n_targets * D, bf16{0});

    // 4. Blocks.
    for (int L = 0; L < c.num_hidden_layers; ++L) {
        if (c.roles[L].engram) {
            const auto t_engram = std::chrono::steady_clock::now();
            engram(f, L, stream);
            if (profiling_) {
                const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_engram).count();
                profile_.engram_seconds[L] += t;
                profile_.block_seconds[L] += t;
            }
        }
        if (need_taps) {
            auto it = std::find(c.dspark_target_layer_ids.begin(), c.dspark_target_layer_ids.end(), L);
            if (it != c.dspark_target_layer_ids.end()) {
                // The block input averaged over the copies: torch's bf16 mean (fp32 sum, /hc, one rounding).
                const int slot = static_cast<int>(it - c.dspark_target_layer_ids.begin());
                for (int64_t i = 0; i < f.n; ++i)
                    for (int k = 0; k < D; ++k) {
                        float sum = 0.0f;
                        for (int cpy = 0; cpy < hc; ++cpy) sum += bf16_to_float(stream[(i * hc + cpy) * D + k]);
                        f.taps[(i * n_targets + slot) * D + k] = float_to_bf16(sum / static_cast<float>(hc));
                    }
            }
        }
        block(f, L, stream, pre_in.data());
    }
    for (const SeqChunk& s : batch.seqs) s.cache->set_length(s.start_pos + s.n_rows);

    const auto t_head = std::chrono::steady_clock::now();
    // 6-7. Final collapse with the last FFN pre-mix, norm, fp32 head, for the requested rows only.
    const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
    std::vector<bf16> collapsed(n_out * D), normed(n_out * D);
    for (int64_t o = 0; o < n_out; ++o) {
        int64_t i = batch.logit_rows[o];
        ops::hc_collapse(stream + i * hc * D, 1, pre_in.data() + i * hc, hc, D, collapsed.data() + o * D);
    }
    ops::rms_norm(collapsed.data(), n_out, D, weights_->norm, static_cast<float>(c.rms_norm_eps), normed.data());
    std::vector<float> normed_f32(n_out * D);
    ops::bf16_to_f32(normed.data(), n_out * D, normed_f32.data());
    out->logits.assign(n_out * c.vocab_size, 0.0f);
    lm_head(normed_f32.data(), n_out, out->logits.data());

    out->main_hidden.clear();
    if (batch.want_main_hidden && c.has_dspark()) {
        out->main_hidden.resize(n_out * n_targets * D);
        for (int64_t o = 0; o < n_out; ++o)
            std::memcpy(out->main_hidden.data() + o * n_targets * D, f.taps.data() + batch.logit_rows[o] * n_targets * D,
                        n_targets * D * sizeof(bf16));
    }
    if (batch.dspark_rings && c.has_dspark()) write_dspark_rings(pools, batch, f.taps.data());
    if (profiling_) {
        const auto now = std::chrono::steady_clock::now();
        profile_.head_seconds += std::chrono::duration<double>(now - t_head).count();
        double blocks = 0.0;
        for (double b : profile_.block_seconds) blocks += b;
        profile_.other_seconds = 0.0;  // recomputed below from the totals
        total_profiled_ += std::chrono::duration<double>(now - t_start).count();
        profile_.other_seconds = total_profiled_ - blocks - profile_.head_seconds;
        ++profile_.forwards;
    }
    return comm_status_;
}

}  // namespace deepinfer::model
