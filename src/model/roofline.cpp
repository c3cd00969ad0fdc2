// Decode-step traffic from the tensor table.
#include "model/roofline.h"

#include <algorithm>
#include <cmath>

#include "core/quant_records.h"
#include "model/parallel.h"
#include "model/tensor_table.h"

namespace deepinfer::model {

BlockTraffic decode_traffic(const ModelConfig& c, int block, int64_t context, int batch, int tp, int ep) {
    BlockTraffic t;
    const LayerRole& role = c.roles[block];
    const double E = role.n_routed_experts, k = role.n_activated_experts;
    // Expected distinct experts selected by `batch` rows of k independent choices, this rank's share.
    const double distinct = E * (1.0 - std::pow(1.0 - k / E, batch));
    for (const TensorSpec& s : expected_tensors(c)) {
        if (s.block != block) continue;
        double bytes = static_cast<double>(s.bytes());
        const std::string& r = s.role;
        if (r.rfind("ffn.experts.", 0) == 0) bytes *= distinct / E / ep;  // per rank: its share of the selected experts
        else if (r == "engram.embed" || r == "engram.embed.scale") bytes = 0;  // rows gathered below
        else if (r.rfind("attn.wq_b", 0) == 0 || r.rfind("attn.wo_a", 0) == 0 || r.rfind("attn.wo_b", 0) == 0 || r == "attn.attn_sink") bytes /= tp;
        else if (r.rfind("ffn.shared_experts.", 0) == 0 && shard_shared_expert(c.moe_intermediate_size, tp)) bytes /= tp;
        else if (r.rfind("engram.wkv", 0) == 0 && shard_rows_evenly(int64_t{c.hidden_size} * (c.hc_mult + 1), tp))
            bytes /= tp;
        t.weight_bytes += bytes;
    }
    if (role.engram) t.weight_bytes += static_cast<double>(batch) * c.engram_hash_cols() * (c.engram_head_dim + c.engram_head_dim / 32);
    const double window = std::min<int64_t>(context, c.sliding_window);
    t.cache_bytes += batch * window * static_cast<double>(window_record_bytes(c.head_dim));
    if (role.compress_ratio != 0 && !role.is_dspark) {
        const double entries = static_cast<double>(context / role.compress_ratio);
        t.cache_bytes += batch * std::min<double>(entries, c.index_topk) * compressed_record_bytes(c.head_dim);
        if (role.index_source) t.cache_bytes += batch * entries * index_key_record_bytes(c.index_head_dim);
    }
    return t;
}

double head_traffic(const ModelConfig& c, int tp) {
    const auto [v0, v1] = head_rows(c.vocab_size, 0, tp);  // rank 0's vocabulary rows (vocab-parallel head)
    return static_cast<double>(v1 - v0) * c.hidden_size * 2 + c.hidden_size * 2;
}

}  // namespace deepinfer::model
