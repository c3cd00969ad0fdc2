// Attention of one layer (spec §5.3): q LoRA path, window KV written as fp8 records, the compressed path
// (model_compressed.cpp), sparse sink attention per sequence over window + selected compressed rows,
// inverse RoPE, grouped low-rank output.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/kernels.h"
#include "core/quant_records.h"
#include "core/scratch_pool.h"
#include "core/thread_pool.h"
#include "model/forward_state.h"
#include "ops/elementwise.h"
#include "ops/linear.h"

namespace deepinfer::model {

void Model::attention(Forward& f, int L, const bf16* x, bf16* out) {
    const ModelConfig& c = config_;
    const BlockWeights& w = weights_->blocks[L];
    const LayerRole& role = c.roles[L];
    const ops::Rope& rope = rope_for(L);
    const int H = local_heads(), hd = c.head_dim, rd = c.qk_rope_head_dim, D = c.hidden_size;
    const int ql = c.q_lora_rank, W = c.sliding_window;
    const int64_t n = f.n;
    const float eps = static_cast<float>(c.rms_norm_eps);

    // Query path: q = wq_b(q_norm(wq_a(x))), RoPE on each head's last rd lanes (spec §5.3.1).
    ScratchVector<bf16> qa(n * ql), qr(n * ql), q(n * H * hd);
    ops::linear_fp8(x, n, w.wq_a, qa.data());
    ops::rms_norm(qa.data(), n, ql, w.q_norm, eps, qr.data());
    ops::linear_fp8(qr.data(), n, w.wq_b, q.data());
    rope.apply_rows(q.data() + (hd - rd), n, int64_t{H} * hd, H, hd, f.positions.data(), false);
    ThreadPool& pool = ThreadPool::global();
    constexpr size_t kRowGrain = ops::kParallelRows;  // the row loops below, as the ops' own

    // Window KV: kv_norm(wkv(x)), RoPE, fp8 QDQ over all lanes, stored as records (spec §5.3.2).
    ScratchVector<bf16> kva(n * hd), kvn(n * hd);
    ops::linear_fp8(x, n, w.wkv, kva.data());
    ops::rms_norm(kva.data(), n, hd, w.kv_norm, eps, kvn.data());
    std::vector<const SeqChunk*> seq_of_row(n);
    for (const SeqChunk& s : f.batch.seqs)
        for (int32_t r = 0; r < s.n_rows; ++r) seq_of_row[s.row_begin + r] = &s;
    pool.parallel_for(static_cast<size_t>(n), [&](size_t i0, size_t i1, int) {
        std::vector<float> row(hd);
        for (size_t i = i0; i < i1; ++i) {
            rope.apply(kvn.data() + i * hd + (hd - rd), 1, hd, f.positions[i], false);
            ops::bf16_to_f32(kvn.data() + i * hd, hd, row.data());
            pack_window_record(row.data(), hd, seq_of_row[i]->cache->window_record(f.pools, L, f.positions[i]),
                               nullptr);
        }
    }, kRowGrain);

    if (role.compress_ratio != 0) compressed_topk(f, L, x, qr.data());

    // Per sequence: KV rows = window positions then the selected compressed entries; index lists in the
    // canonical order described below.
    ScratchVector<bf16> o(n * H * hd);
    const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));
    ScratchVector<bf16> kv_rows;
    ScratchVector<int32_t> idx;
    std::vector<int32_t> entries, slot_of;
    std::vector<const uint8_t*> records;  // the rows' cache records: window, then compressed
    for (size_t si = 0; si < f.batch.seqs.size(); ++si) {
        const SeqChunk& s = f.batch.seqs[si];
        const int64_t start = s.start_pos, end = s.start_pos + s.n_rows, S = s.n_rows;
        const int64_t w0 = std::max<int64_t>(0, start - (W - 1));
        const int64_t n_win = end - w0;
        // Distinct compressed entries selected by any row of the chunk, ascending, and each one's place among
        // them (slot_of[entry]). Marked, not sorted: a prefill chunk selects up to S * k of them.
        entries.clear();
        const Forward::Seq& fs = f.seqs[si];
        const int k = role.compress_ratio != 0 ? fs.k : 0;
        if (k > 0) {
            const int32_t last = *std::max_element(fs.topk.begin(), fs.topk.end());
            slot_of.assign(static_cast<size_t>(last + 1), -1);
            for (int32_t j : fs.topk)
                if (j >= 0) slot_of[j] = 0;
            for (int32_t j = 0; j <= last; ++j)
                if (slot_of[j] == 0) {
                    slot_of[j] = static_cast<int32_t>(entries.size());
                    entries.push_back(j);
                }
        }
        const int64_t n_kv = n_win + static_cast<int64_t>(entries.size());
        kv_rows.resize(n_kv * hd);
        // A decode step unpacks up to W window records and index_topk compressed entries per layer (O(context)
        // until the top-k caps it): the kernel table's unpack, over the pool.
        const int src = entries.empty() ? -1 : layout_.source_of_layer[L];
        records.resize(static_cast<size_t>(n_kv));
        for (int64_t r = 0; r < n_kv; ++r)
            records[r] = r < n_win ? s.cache->window_record(f.pools, L, w0 + r)
                                   : s.cache->compressed_record(f.pools, src, entries[r - n_win]);
        const backend::Kernels& kernels = backend::active_kernels();
        kernels.unpack_records(CacheRecord::kWindow, records.data(), n_win, hd, kv_rows.data(), pool);
        kernels.unpack_records(CacheRecord::kCompressed, records.data() + n_win, n_kv - n_win, hd,
                               kv_rows.data() + n_win * hd, pool);
        // Index lists in a canonical order that does not depend on how the prompt was chunked: the row's
        // visible window positions ascending, then its selected compressed entries ascending, then -1
        // padding. The kernel's online softmax works in blocks of 64 entries and rounds probabilities
        // relative to the running maximum, so the reference's placement of -1 entries (which differs
        // between its prefill and decode lists, spec §5.3.2) moves results by an ulp; a compact list makes
        // chunked prefill, decode and batching bit-identical to one-shot prefill, and equals the
        // reference's list exactly whenever it has no -1 entries (every decode step past the window).
        const int topk = std::min<int>(W, static_cast<int>(end - w0)) + k;
        idx.resize(S * topk);
        pool.parallel_for(static_cast<size_t>(S), [&](size_t r0, size_t r1, int) {
            for (auto r = static_cast<int64_t>(r0); r < static_cast<int64_t>(r1); ++r) {
                const int64_t t = start + r;
                int32_t* list = idx.data() + r * topk;
                int e = 0;
                for (int64_t p = std::max<int64_t>(0, t - W + 1); p <= t; ++p)
                    list[e++] = static_cast<int32_t>(p - w0);
                for (int j = 0; j < k; ++j) {
                    int32_t entry = fs.topk[r * k + j];
                    if (entry < 0) continue;
                    list[e++] = static_cast<int32_t>(n_win + slot_of[entry]);
                }
                std::fill(list + e, list + topk, -1);
            }
        }, kRowGrain);
        backend::active_kernels().sparse_attn(q.data() + s.row_begin * H * hd, S, H, hd, kv_rows.data(), idx.data(),
                                              topk, w.attn_sink, scale, o.data() + s.row_begin * H * hd,
                                              ThreadPool::global());
    }

    // Inverse RoPE at the query position, then the grouped low-rank output (spec §5.3.7).
    rope.apply_rows(o.data() + (hd - rd), n, int64_t{H} * hd, H, hd, f.positions.data(), true);
    output_projection(w, o.data(), n, out);
    (void)D;
}

void Model::output_projection(const BlockWeights& w, const bf16* o, int64_t n, bf16* out) {
    const ModelConfig& c = config_;
    const int G = local_groups(), R = c.o_lora_rank, D = c.hidden_size;
    const int64_t Kg = static_cast<int64_t>(local_heads()) * c.head_dim / G;
    // Group g reads columns [g Kg, (g+1) Kg) of o [n, G Kg] and writes columns [g R, (g+1) R) of low_rank [n, G R];
    // all groups in one dispatch.
    ScratchVector<bf16> low_rank(n * G * R);
    std::vector<backend::Fp8Bf16xGemm> groups(G);
    for (int g = 0; g < G; ++g) groups[g] = {o + g * Kg, n, G * Kg, w.wo_a[g], low_rank.data() + g * R, int64_t{G} * R};
    ops::linear_fp8_bf16x_grouped(groups);
    if (plan_.tp_size == 1) {
        ops::linear_fp8(low_rank.data(), n, w.wo_b, out);
        return;
    }
    // Row-parallel wo_b: fp32 partial sums added over the group, one rounding to bf16. (The reference's
    // RowParallelLinear rounds each rank's partial to bf16 first; with cancelling partials that moves the
    // logits far from the one-rank result, which is what the goldens define, so we keep fp32.)
    ScratchVector<float> partial(n * D);
    ops::linear_fp8_f32(low_rank.data(), n, w.wo_b, partial.data());
    all_reduce(plan_.tp, partial.data(), partial.size());
    ops::f32_to_bf16(partial.data(), n * D, out);
}

}  // namespace deepinfer::model
