// Binding checkpoint tensors to BlockWeights; wo_a kept in fp8 per output group (spec §3.4 step 4 dequantizes
// it to bf16, exactly for every scale code >= 3; ops::linear_fp8_bf16x_grouped forms the same products from the
// codes, docs/numerics.md).
#include "model/weights.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>

#include "core/check.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "model/census.h"

namespace deepinfer::model {
namespace {

// Typed views of checkpoint tensors. safetensors does not promise that a tensor's offset suits its dtype
// (HF's writer sorts tensors so that it does; other writers may not): a view whose address is not aligned for
// its element type is served from an aligned copy kept in `owned`, since reading a float through a
// misaligned pointer is undefined behaviour.
class Binder {
   public:
    Binder(const loader::TensorStore& store, std::vector<std::vector<uint8_t>>* owned) : store_(store), owned_(owned) {}
    const loader::TensorEntry& get(const std::string& name) const {
        const loader::TensorEntry* e = store_.find(name);
        DI_CHECK_MSG(e != nullptr, "tensor {} vanished after the census", name);
        return *e;
    }
    template <typename T>
    const T* ptr(const std::string& name) const {
        return aligned<T>(get(name));
    }
    Fp8Matrix fp8(const std::string& prefix) const {
        const auto& w = get(prefix + ".weight");
        return {w.data, get(prefix + ".scale").data, w.shape[0], w.shape[1]};
    }
    Fp4Matrix fp4(const std::string& prefix) const {
        const auto& w = get(prefix + ".weight");
        return {w.data, get(prefix + ".scale").data, w.shape[0], w.shape[1] * 2};
    }
    Bf16Matrix bf16m(const std::string& name) const {
        const auto& w = get(name);
        return {aligned<bf16>(w), w.shape[0], w.shape[1]};
    }
    F32Matrix f32m(const std::string& name) const {
        const auto& w = get(name);
        return {aligned<float>(w), w.shape[0], w.shape[1]};
    }

   private:
    template <typename T>
    const T* aligned(const loader::TensorEntry& e) const {
        if (reinterpret_cast<uintptr_t>(e.data) % alignof(T) == 0) return reinterpret_cast<const T*>(e.data);
        owned_->emplace_back(e.data, e.data + e.nbytes);  // operator new: aligned for any scalar type
        return reinterpret_cast<const T*>(owned_->back().data());
    }
    const loader::TensorStore& store_;
    std::vector<std::vector<uint8_t>>* owned_;
};

// Rows [r0, r0 + n) of block-scaled fp8 weights: a view (r0 and n are multiples of 32, or n reaches the end).
Fp8Matrix fp8_rows(const Fp8Matrix& m, int64_t r0, int64_t n) {
    const int64_t scale_cols = (m.cols + 31) / 32;
    return {m.codes + r0 * m.cols, m.scales + (r0 / 32) * scale_cols, n, m.cols};
}

// Columns [c0, c0 + n) of block-scaled fp8 weights, copied (c0 and n multiples of 32).
Fp8Matrix fp8_columns(const Fp8Matrix& m, int64_t c0, int64_t n, std::vector<std::vector<uint8_t>>* owned) {
    const int64_t scale_cols = (m.cols + 31) / 32, scale_rows = (m.rows + 31) / 32;
    std::vector<uint8_t> codes(static_cast<size_t>(m.rows * n)), scales(static_cast<size_t>(scale_rows * (n / 32)));
    for (int64_t r = 0; r < m.rows; ++r) std::copy(m.codes + r * m.cols + c0, m.codes + r * m.cols + c0 + n, codes.begin() + r * n);
    for (int64_t r = 0; r < scale_rows; ++r)
        std::copy(m.scales + r * scale_cols + c0 / 32, m.scales + r * scale_cols + (c0 + n) / 32, scales.begin() + r * (n / 32));
    owned->push_back(std::move(codes));
    const uint8_t* c = owned->back().data();
    owned->push_back(std::move(scales));
    return {c, owned->back().data(), m.rows, n};
}

}  // namespace

Expected<std::unique_ptr<ModelWeights>> bind_weights(const ModelConfig& c, std::unique_ptr<loader::TensorStore> store,
                                                     const ParallelPlan& plan) {
    DI_RETURN_IF_ERROR(check_checkpoint(c, *store, nullptr));
    const int64_t hd = c.head_dim, R = c.o_lora_rank;
    const int64_t local_heads = c.num_attention_heads / plan.tp_size, local_groups = c.o_groups / plan.tp_size;
    auto w = std::make_unique<ModelWeights>();
    Binder bind(*store, &w->owned_bytes);
    w->embed = bind.ptr<bf16>("embed.weight");
    w->head = bind.bf16m("head.weight");
    if (plan.tp_size > 1 && w->head.data) {
        // Vocab-parallel LM head: rank r keeps rows [V r / tp, V (r + 1) / tp) (the head is the largest dense
        // weight, 1.3 GB in the release; replicated, every rank would stream all of it per token).
        const auto [v0, v1] = head_rows(c.vocab_size, plan.tp_rank, plan.tp_size);
        w->head.data += v0 * w->head.cols;
        w->head.rows = v1 - v0;
        w->head_row_begin = v0;
    }
    w->norm = bind.ptr<bf16>("norm.weight");
    w->blocks.resize(c.n_blocks());
    for (int b = 0; b < c.n_blocks(); ++b) {
        const LayerRole& role = c.roles[b];
        const std::string P = c.block_prefix(b);
        BlockWeights& B = w->blocks[b];
        B.attn_norm = bind.ptr<bf16>(P + ".attn_norm.weight");
        B.ffn_norm = bind.ptr<bf16>(P + ".ffn_norm.weight");
        B.hc_attn_fn = bind.f32m(P + ".hc_attn_fn");
        B.hc_ffn_fn = bind.f32m(P + ".hc_ffn_fn");
        B.hc_attn_base = bind.ptr<float>(P + ".hc_attn_base");
        B.hc_ffn_base = bind.ptr<float>(P + ".hc_ffn_base");
        B.hc_attn_scale = bind.ptr<float>(P + ".hc_attn_scale");
        B.hc_ffn_scale = bind.ptr<float>(P + ".hc_ffn_scale");
        B.attn_sink = bind.ptr<float>(P + ".attn.attn_sink") + plan.tp_rank * local_heads;
        B.q_norm = bind.ptr<bf16>(P + ".attn.q_norm.weight");
        B.kv_norm = bind.ptr<bf16>(P + ".attn.kv_norm.weight");
        B.wq_a = bind.fp8(P + ".attn.wq_a");
        B.wq_b = fp8_rows(bind.fp8(P + ".attn.wq_b"), plan.tp_rank * local_heads * hd, local_heads * hd);
        B.wkv = bind.fp8(P + ".attn.wkv");
        B.wo_b = bind.fp8(P + ".attn.wo_b");
        if (plan.tp_size > 1)
            B.wo_b = fp8_columns(B.wo_b, plan.tp_rank * local_groups * R, local_groups * R, &w->owned_bytes);
        const Fp8Matrix wo_a = bind.fp8(P + ".attn.wo_a");
        for (int g = 0; g < local_groups; ++g)
            B.wo_a.push_back(fp8_rows(wo_a, (static_cast<int64_t>(plan.tp_rank) * local_groups + g) * R, R));
        if (role.kv_source) {
            B.compressor_wkv = bind.bf16m(P + ".attn.compressor.wkv.weight");
            if (role.compress_ratio > 1) B.compressor_wgate = bind.bf16m(P + ".attn.compressor.wgate.weight");
            B.compressor_norm = bind.ptr<bf16>(P + ".attn.compressor.norm.weight");
            B.indexer_wk = bind.bf16m(P + ".attn.indexer.wk.weight");
            B.indexer_k_norm = bind.ptr<bf16>(P + ".attn.indexer.k_norm.weight");
        }
        if (role.index_source) {
            B.indexer_wq_b = bind.fp8(P + ".attn.indexer.wq_b");
            B.indexer_weights_proj = bind.bf16m(P + ".attn.indexer.weights_proj.weight");
        }
        B.gate = bind.bf16m(P + ".ffn.gate.weight");
        B.gate_bias = bind.ptr<float>(P + ".ffn.gate.bias");
        B.gate_bias_vl = bind.ptr<float>(P + ".ffn.gate.bias_vl");
        B.experts.resize(role.n_routed_experts);
        const int local_experts = role.n_routed_experts / plan.ep_size;
        B.expert_begin = plan.ep_rank * local_experts;
        B.expert_end = B.expert_begin + local_experts;
        for (int e = B.expert_begin; e < B.expert_end; ++e) {
            std::string X = fmt::format("{}.ffn.experts.{}", P, e);
            B.experts[e] = {bind.fp4(X + ".w1"), bind.fp4(X + ".w2"), bind.fp4(X + ".w3")};
        }
        B.shared_w1 = bind.fp8(P + ".ffn.shared_experts.w1");
        B.shared_w2 = bind.fp8(P + ".ffn.shared_experts.w2");
        B.shared_w3 = bind.fp8(P + ".ffn.shared_experts.w3");
        if (plan.tp != nullptr && shard_shared_expert(B.shared_w1.rows, plan.tp_size)) {
            const int64_t part = B.shared_w1.rows / plan.tp_size, first = plan.tp_rank * part;
            B.shared_w1 = fp8_rows(B.shared_w1, first, part);
            B.shared_w3 = fp8_rows(B.shared_w3, first, part);
            B.shared_w2 = fp8_columns(B.shared_w2, first, part, &w->owned_bytes);
            B.shared_split = true;
        }
        if (role.engram) {
            const auto& table = bind.get(P + ".engram.embed.weight");
            const auto& scale = bind.get(P + ".engram.embed.scale");
            B.engram_table = table.data;
            B.engram_rows = table.shape[0];
            B.engram_scale = scale.data;
            if (plan.host && plan.host->size() > 1) {
                // One copy per host (spec: ~200 GB of tables): the host's first rank fills shared memory.
                int64_t leader_pid = getpid();
                DI_RETURN_IF_ERROR(plan.host->broadcast(&leader_pid, sizeof(leader_pid), 0));
                for (const auto* t : {&table, &scale}) {
                    const std::string key = fmt::format("{}-engram-{}-{}", leader_pid, b, t == &table ? "table" : "scale");
                    DI_ASSIGN_OR_RETURN(auto region, dist::share_on_host(*plan.host, key, t->nbytes, [&](uint8_t* dst) {
                                            std::memcpy(dst, t->data, t->nbytes);
                                        }));
                    (t == &table ? B.engram_table : B.engram_scale) = region->data();
                    w->shared.push_back(std::move(region));
                }
            }
            B.engram_wkv = bind.fp8(P + ".engram.wkv");
            if (plan.tp != nullptr && shard_rows_evenly(B.engram_wkv.rows, plan.tp_size)) {
                // Split by output rows like the head (the largest weight of an Engram layer, 140 MB released).
                const int64_t part = B.engram_wkv.rows / plan.tp_size;
                B.engram_wkv = fp8_rows(B.engram_wkv, plan.tp_rank * part, part);
                B.engram_wkv_split = true;
            }
            B.engram_q_weight = bind.ptr<bf16>(P + ".engram.q_weight");
            B.engram_k_weight = bind.ptr<bf16>(P + ".engram.k_weight");
        }
        if (role.is_dspark && b == c.num_hidden_layers) {
            B.main_proj = bind.fp8(P + ".main_proj");
            B.main_norm = bind.ptr<bf16>(P + ".main_norm.weight");
        }
        if (role.is_dspark && b == c.n_blocks() - 1) {
            B.dspark_norm = bind.ptr<bf16>(P + ".norm.weight");
            B.markov_embed = bind.bf16m(P + ".markov_head.embed.weight");
            B.markov_head = bind.bf16m(P + ".markov_head.head.weight");
            B.confidence_proj = bind.bf16m(P + ".confidence_head.proj.weight");
        }
    }
    prepare_for_kernels(*w);
    w->store = std::move(store);
    return w;
}

void prepare_for_kernels(ModelWeights& w) {
    // Repack every quantized weight once into the active kernel table's layout (the checkpoint layout stays
    // mapped for the scalar reference); GEMMs on unprepared weights would repack on every call.
    const backend::Kernels& k = backend::active_kernels();
    // One weight into the arena in the table's layout (prepare_fp8 / prepare_fp4 / prepare_bf16); kept where the
    // table made one, else the weight stays read as it is.
    auto prepare = [&](auto& m, auto prepare_fn) {
        auto p = std::make_unique<backend::PackedWeight>();
        p->arena = &w.packed_arena;
        prepare_fn(m, p.get(), ThreadPool::global());
        if (p->layout == backend::PackedLayout::kNone) return;
        m.prepared = p.get();
        w.packed.push_back(std::move(p));
    };
    auto fp8 = [&](Fp8Matrix& m) {
        if (m.codes) prepare(m, k.prepare_fp8);
    };
    auto fp4 = [&](Fp4Matrix& m) {
        if (m.packed) prepare(m, k.prepare_fp4);
    };
    // The mHC mixes' fp32 weights (2 MB each released) are read in place by every table; copied into the arena
    // they stream through huge pages like the packed weights (from the mapped checkpoint's 4 KB pages a call took
    // 81-82 us, from the arena 76-80 us in a released-dims decode step, docs/PERFORMANCE.md).
    auto f32 = [&](F32Matrix& m) {
        if (!m.data) return;
        const size_t bytes = static_cast<size_t>(m.rows * m.cols) * sizeof(float);
        auto* copy = reinterpret_cast<float*>(w.packed_arena.allocate(bytes));
        std::memcpy(copy, m.data, bytes);
        m.data = copy;
    };
    for (BlockWeights& b : w.blocks) {
        f32(b.hc_attn_fn);
        f32(b.hc_ffn_fn);
        for (Fp8Matrix* m : {&b.wq_a, &b.wq_b, &b.wkv, &b.wo_b, &b.indexer_wq_b, &b.shared_w1, &b.shared_w2,
                             &b.shared_w3, &b.engram_wkv, &b.main_proj})
            fp8(*m);
        for (Fp8Matrix& m : b.wo_a) fp8(m);
        for (int e = b.expert_begin; e < b.expert_end; ++e) {
            fp4(b.experts[e].w1);
            fp4(b.experts[e].w2);
            fp4(b.experts[e].w3);
        }
    }
    // The bf16 weights where the table reads a layout of its own (AMX tiles on AVX-512; other tables read them as
    // they are). fp32 x bf16 (backend/cpu/x86/avx512/gemm_head_amx.cpp): the LM head (this rank's rows under TP), the
    // router and the ratio-2 compressor, which a prefill runs over every token (docs/PERFORMANCE.md, "Sixteenth
    // session"); bf16 x bf16: the ratio-1 compressor and the indexer's linears.
    auto bf16 = [&](Bf16Matrix& m) {
        if (k.prepare_bf16 && m.data) prepare(m, k.prepare_bf16);
    };
    bf16(w.head);
    for (BlockWeights& b : w.blocks) {
        bf16(b.gate);
        bf16(b.compressor_wkv);  // ratio 2: fp32 x bf16; ratio 1: a bf16 linear (gemm_bf16 reads the same tiles)
        if (b.compressor_wgate.data) bf16(b.compressor_wgate);
        // the bf16 linears (gemm_bf16 on tiles where the table has them, backend/cpu/x86/avx512/gemm_bf16_amx.cpp)
        bf16(b.indexer_wk);
        bf16(b.indexer_weights_proj);
    }
}

}  // namespace deepinfer::model
