// The compressed path of one layer (spec §5.3.3-§5.3.6): KV sources pool new latents (ratio 1: one per
// token; ratio 2: softmax-gated pairs, streaming across chunks) and store them as fp4 compressed-KV and
// index-key records; index sources score every visible compressed entry with the lightning indexer,
// apply the candidate-block filter, and publish the per-row top-k for the layers that follow.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/kernels.h"
#include "core/check.h"
#include "core/quant_records.h"
#include "core/scratch_pool.h"
#include "core/thread_pool.h"
#include "model/forward_state.h"
#include "ops/elementwise.h"
#include "ops/linear.h"

namespace deepinfer::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Level one of the two-level top-k (select_candidate_blocks, spec §5.3.6) for one query row.
void candidate_blocks(const float* scores, int64_t width, int64_t n_vis, int topk_blocks, int block_size,
                      uint8_t* mask) {
    const int64_t n_blocks = (width + block_size - 1) / block_size;
    std::vector<float> block_score(n_blocks);
    for (int64_t b = 0; b < n_blocks; ++b) {  // (block by block: no division per score)
        float best = kNegInf;
        for (int64_t j = b * block_size; j < std::min<int64_t>(width, (b + 1) * block_size); ++j)
            best = std::max(best, scores[j]);
        block_score[b] = best;
    }
    // Pin the block holding the newest visible position (Python floor division: none when n_vis == 0).
    if (n_vis > 0) block_score[(n_vis - 1) / block_size] = std::numeric_limits<float>::infinity();
    // The `keep` best blocks by (score descending, block ascending): the indexer's top-k (a radix select; no block
    // score is NaN, std::max above never takes one, so its NaN rule does not enter). A partial sort of 4096 blocks
    // (a 32 k context) took ~0.2 ms a row.
    const int keep = static_cast<int>(std::min<int64_t>(topk_blocks, n_blocks));
    std::vector<int32_t> kept(static_cast<size_t>(keep));
    backend::active_kernels().topk_entries(block_score.data(), n_blocks, keep, kept.data());
    std::fill(mask, mask + width, 0);
    for (const int32_t b : kept) {
        if (!(block_score[b] > kNegInf)) continue;
        for (int64_t j = b * int64_t{block_size}; j < std::min<int64_t>(width, (b + 1) * int64_t{block_size}); ++j)
            mask[j] = 1;
    }
}

// Top-k entry numbers of one row, ascending, entries past n_vis replaced by -1 (Indexer.forward).
// Ties go to the lower entry number. torch.topk's choice among equal scores depends on the row width and k
// (its nth_element runs over the invisible -inf tail too), which change with the chunking; a fixed rule keeps
// every row independent of how the prompt was chunked (tests/model/invariants_test.cpp).
void top_k_row(const float* scores, int64_t width, int k, int64_t n_vis, int32_t* out) {
    backend::active_kernels().topk_entries(scores, width, k, out);
    for (int e = 0; e < k; ++e)
        if (out[e] >= n_vis) out[e] = -1;
}

}  // namespace

void Model::compressed_topk(Forward& f, int L, const bf16* x, const bf16* qr) {
    const ModelConfig& c = config_;
    const BlockWeights& w = weights_->blocks[L];
    const LayerRole& role = c.roles[L];
    const ops::Rope& rope = rope_for(L);
    const int R = role.compress_ratio, hd = c.head_dim, rd = c.qk_rope_head_dim, D = c.hidden_size;
    const int Hi = c.index_n_heads, Di = c.index_head_dim;
    const int64_t n = f.n;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const int src = layout_.source_of_layer[L];

    if (role.kv_source) {
        // New latents (pre-RoPE, bf16) of the groups completed in this forward, with their entry numbers.
        std::vector<bf16> latents;
        std::vector<int64_t> latent_entry;
        std::vector<kv::SequenceCache*> latent_cache;
        if (R == 1) {
            // Ratio 1: norm(bf16 Linear(wkv, x)) per token, no gate, no state (model.py:461-462).
            ScratchVector<bf16> raw(n * hd);
            latents.resize(n * hd);
            ops::linear_bf16(x, n, w.compressor_wkv, raw.data());
            ops::rms_norm(raw.data(), n, hd, w.compressor_norm, eps, latents.data());
            for (const SeqChunk& s : f.batch.seqs)
                for (int32_t r = 0; r < s.n_rows; ++r) {
                    latent_entry.push_back(s.start_pos + r);
                    latent_cache.push_back(s.cache);
                }
        } else {
            // Ratio 2: fp32 u = Wkv x, g = Wgate x; pairs pooled with a per-lane softmax over the two tokens.
            ScratchVector<float> xf(n * D), u(n * hd), g(n * hd);
            ops::bf16_rows_to_f32(x, n, D, xf.data());
            ops::linear_f32(xf.data(), n, w.compressor_wkv, u.data());
            ops::linear_f32(xf.data(), n, w.compressor_wgate, g.data());
            std::vector<bf16> pooled_bf16(hd), normed(hd);
            for (const SeqChunk& s : f.batch.seqs)
                for (int32_t r = 0; r < s.n_rows; ++r) {
                    const int64_t p = s.start_pos + r, i = s.row_begin + r;
                    if (p % R == 0) {
                        // Even position: its (u, g) waits for the pair's second token (may be in a later chunk).
                        float* slot = s.cache->compressor_slot(src, p);
                        std::copy(u.begin() + i * hd, u.begin() + (i + 1) * hd, slot);
                        std::copy(g.begin() + i * hd, g.begin() + (i + 1) * hd, slot + hd);
                        continue;
                    }
                    const float* u0;
                    const float* g0;
                    if (r > 0) {
                        u0 = u.data() + (i - 1) * hd;
                        g0 = g.data() + (i - 1) * hd;
                    } else {
                        const float* slot = s.cache->find_compressor_slot(src, p - 1);
                        DI_CHECK_MSG(slot != nullptr, "ratio-2 compressor state of position {} is gone", p - 1);
                        u0 = slot;
                        g0 = slot + hd;
                    }
                    backend::active_kernels().pair_pool(u0, g0, u.data() + i * hd, g.data() + i * hd, hd,
                                                        pooled_bf16.data());
                    ops::rms_norm(pooled_bf16.data(), 1, hd, w.compressor_norm, eps, normed.data());
                    latents.insert(latents.end(), normed.begin(), normed.end());
                    latent_entry.push_back(p / R);
                    latent_cache.push_back(s.cache);
                }
        }
        const int64_t n_new = static_cast<int64_t>(latent_entry.size());
        // Index keys from the pre-RoPE latents: k_norm(wk(latent)), RoPE at the group's first token, fp4 QDQ.
        ScratchVector<bf16> kraw(n_new * Di), keys(n_new * Di);
        ops::linear_bf16(latents.data(), n_new, w.indexer_wk, kraw.data());
        ops::rms_norm(kraw.data(), n_new, Di, w.indexer_k_norm, eps, keys.data());
        // Entries over the pool (each writes its own records).
        ThreadPool::global().parallel_for(static_cast<size_t>(n_new), [&](size_t e0, size_t e1, int) {
            std::vector<float> row(std::max(hd, Di));
            for (auto e = static_cast<int64_t>(e0); e < static_cast<int64_t>(e1); ++e) {
                const int64_t group_pos = latent_entry[e] * R;
                rope.apply(keys.data() + e * Di + (Di - rd), 1, Di, group_pos, false);
                ops::bf16_to_f32(keys.data() + e * Di, Di, row.data());
                pack_index_key_record(row.data(), Di, latent_cache[e]->index_record(f.pools, src, latent_entry[e]),
                                      nullptr);
                // Compressed KV: RoPE on the latent's last rd lanes, then fp4 QDQ with e4m3 scales per 16.
                bf16* lat = latents.data() + e * hd;
                rope.apply(lat + (hd - rd), 1, hd, group_pos, false);
                ops::bf16_to_f32(lat, hd, row.data());
                pack_compressed_record(row.data(), hd,
                                       latent_cache[e]->compressed_record(f.pools, src, latent_entry[e]), nullptr);
            }
        }, ops::kParallelRows);
    }

    if (!role.index_source) return;  // consumers reuse the top-k their index source published

    // Index queries and head weights for every row (spec §5.3.5).
    ScratchVector<bf16> qi(n * Hi * Di), wts(n * Hi);
    ops::linear_fp8(qr, n, w.indexer_wq_b, qi.data());
    // RoPE, then the fp4 QDQ by rows over the pool (serial, ~2% of a 2048-token prefill's samples), kept as index-key
    // records: the same quantizer as the keys', read by index_scores_fp4 as the keys are.
    rope.apply_rows(qi.data() + (Di - rd), n, int64_t{Hi} * Di, Hi, Di, f.positions.data(), false);
    const size_t record_bytes = index_key_record_bytes(Di);
    std::vector<uint8_t> q_records(static_cast<size_t>(n) * Hi * record_bytes);
    ThreadPool::global().parallel_for(static_cast<size_t>(n) * Hi, [&](size_t r0, size_t r1, int) {
        std::vector<float> head(Di);
        for (size_t r = r0; r < r1; ++r) {
            ops::bf16_to_f32(qi.data() + r * Di, Di, head.data());
            pack_index_key_record(head.data(), Di, q_records.data() + r * record_bytes, nullptr);
        }
    }, ops::kParallelRows);
    ops::linear_bf16(x, n, w.indexer_weights_proj, wts.data());
    const float weight_scale = static_cast<float>(std::pow(static_cast<double>(Di), -0.5) * std::pow(static_cast<double>(Hi), -0.5));
    for (auto& v : wts) v = float_to_bf16(bf16_to_float(v) * weight_scale);

    ScratchVector<float> scores, scored;
    std::vector<const uint8_t*> key_records;
    std::vector<int64_t> entries;  // the entries scored, where not all of them
    std::vector<uint8_t> any_candidate;
    for (size_t si = 0; si < f.batch.seqs.size(); ++si) {
        const SeqChunk& s = f.batch.seqs[si];
        Forward::Seq& fs = f.seqs[si];
        const int64_t S = s.n_rows, end = s.start_pos + S, compress_len = end / R;
        fs.k = static_cast<int>(std::min<int64_t>(c.index_topk, compress_len));
        fs.topk.assign(S * fs.k, -1);
        if (compress_len == 0) continue;
        // A consumer of candidate blocks scores only the union of its rows' candidates: select_row masks every
        // other entry to -inf (spec §5.3.6), and past candidate_topk_blocks x candidate_block_size entries (16384 in
        // the released config) most of a long context is none. A key's score does not depend on which keys are
        // scored with it (tests/ops/row_invariance_test.cpp), so the rows' scores are those of scoring them all.
        entries.clear();
        if (role.uses_candidates) {
            DI_CHECK_EQ(fs.candidate_width, compress_len);
            // the rows' masks or-ed row by row (sequential bytes: a prefill chunk has hundreds of rows)
            any_candidate.assign(static_cast<size_t>(compress_len), 0);
            for (int64_t r = 0; r < S; ++r) {
                const uint8_t* mask = fs.candidates.data() + r * compress_len;
                for (int64_t j = 0; j < compress_len; ++j) any_candidate[j] |= mask[j];
            }
            for (int64_t j = 0; j < compress_len; ++j)
                if (any_candidate[j]) entries.push_back(j);
        }
        const bool some = role.uses_candidates && 4 * static_cast<int64_t>(entries.size()) < 3 * compress_len;
        const int64_t n_keys = some ? static_cast<int64_t>(entries.size()) : compress_len;
        // the keys scored: every compressed key of the sequence, each step (O(context)), or the candidates'
        key_records.resize(static_cast<size_t>(n_keys));
        for (int64_t j = 0; j < n_keys; ++j)
            key_records[j] = s.cache->index_record(f.pools, src, some ? entries[j] : j);
        scores.resize(S * compress_len);
        scored.resize(some ? S * n_keys : 0);
        backend::active_kernels().index_scores_fp4(q_records.data() + s.row_begin * Hi * record_bytes, S, Hi, Di,
                                                   key_records.data(), n_keys, wts.data() + s.row_begin * Hi,
                                                   some ? scored.data() : scores.data(), n_keys, ThreadPool::global());
        if (some) {
            std::fill(scores.begin(), scores.end(), kNegInf);
            for (int64_t r = 0; r < S; ++r)
                for (int64_t j = 0; j < n_keys; ++j) scores[r * compress_len + entries[j]] = scored[r * n_keys + j];
        }
        if (role.candidate_source) {
            fs.candidates.assign(S * compress_len, 0);
            fs.candidate_width = compress_len;
        }
        // Rows over the pool (a prefill row's top-k runs over every compressed entry of the sequence).
        auto select_row = [&](int64_t r) {
            float* sr = scores.data() + r * compress_len;
            const int64_t n_vis = (s.start_pos + r + 1) / R;
            for (int64_t j = n_vis; j < compress_len; ++j) sr[j] = kNegInf;
            if (role.candidate_source) {
                candidate_blocks(sr, compress_len, n_vis, c.candidate_topk_blocks, c.candidate_block_size,
                                 fs.candidates.data() + r * compress_len);
            } else if (role.uses_candidates) {
                DI_CHECK_EQ(fs.candidate_width, compress_len);
                const uint8_t* mask = fs.candidates.data() + r * compress_len;
                for (int64_t j = 0; j < compress_len; ++j)
                    if (!mask[j]) sr[j] = kNegInf;
            }
            top_k_row(sr, compress_len, fs.k, n_vis, fs.topk.data() + r * fs.k);
        };
        ThreadPool::global().parallel_for(static_cast<size_t>(S), [&](size_t r0, size_t r1, int) {
            for (size_t r = r0; r < r1; ++r) select_row(static_cast<int64_t>(r));
        }, ops::kParallelRows);
    }
}

}  // namespace deepinfer::model
