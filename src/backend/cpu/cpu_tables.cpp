// The AVX2 and AVX-512 kernel tables: the drivers of backend/cpu bound to one ISA's routines. The AVX-512
// table needs avx512 f/bw/vl/dq plus bf16 (vdpbf16ps), vbmi (vpermi2b, the fp8 decode) and vnni (vpdpbusd,
// the integer MXFP4 GEMM): Zen 4/5, Sapphire Rapids and later. Older AVX-512 CPUs get the AVX2 table from the
// registry's fallback.
#include "backend/cpu/drivers.h"
#include "backend/cpu/packing.h"

namespace deepinfer::backend::cpu {

const IsaOps& avx2_ops() {
    static const IsaOps ops = {Isa::kAvx2,        avx2::act_quant_rows, 4,
                               avx2::decode_acts, avx2::gemm_fp8,       avx2::gemm_fp4,
                               avx2::gemm_bf16,   avx2::gemm_f32_bf16w, avx2::gemm_f32,
                               avx2::sparse_attn, avx2::index_scores,   avx2::index_scores_fp4, avx2::read_stream,
                               avx2::fma_loop,    avx2::dot_loop,       8,
                               avx2::rms_norm_rows, avx2::swiglu_rows, avx2::rope,
                               avx2::pair_pool, avx2::hc_sinkhorn_rows, avx2::hc_collapse_rows,
                               avx2::hc_expand_rows, avx2::order_keys, avx2::select_entries,
                               avx2::gather_fp8_rows, avx2::unpack_records_rows,
                               avx2::fp4_row_bytes, avx2::prep_fp4_row,
                               avx2::fp8_bits_acts, avx2::fp8_bits_acts_bytes,
                               // (no AMX, no pairs form)
                               nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               avx2::gemm_f32_squares_tiles, nullptr, nullptr, avx2::gemm_f32_squares_rows};
    return ops;
}

const IsaOps& avx512_ops() {
    static const IsaOps ops = {Isa::kAvx512,        avx512::act_quant_rows, 2,
                               avx512::decode_acts, avx512::gemm_fp8,       avx512::gemm_fp4,
                               avx512::gemm_bf16,   avx512::gemm_f32_bf16w, avx512::gemm_f32,
                               avx512::sparse_attn, avx512::index_scores,   avx512::index_scores_fp4,
                               avx512::read_stream,
                               avx512::fma_loop,    avx512::dot_loop,       16,
                               avx512::rms_norm_rows, avx512::swiglu_rows, avx512::rope,
                               avx512::pair_pool, avx512::hc_sinkhorn_rows, avx512::hc_collapse_rows,
                               avx512::hc_expand_rows, avx512::order_keys, avx512::select_entries,
                               avx512::gather_fp8_rows, avx512::unpack_records_rows,
                               // the MXFP4 GEMM reads the planes of AVX2's integer rows (gemm_quant_avx512.cpp)
                               avx512::fp4_row_bytes, avx2::prep_plane_row, avx512::fp8_bits_acts,
                               avx512::fp8_bits_acts_bytes,
                               avx512::gemm_f32_bf16w_tiles, avx512::fp8_tile_acts,
                               avx512::fp4_tile_acts,       avx512::tile_loop,
                               avx512::fp8_tile_item_rows,  avx512::gemm_bf16_tiles,
                               avx512::bf16_pair_tiles,     avx512::prep_fp4_flags,
                               avx512::gemm_f32_squares_tiles, avx512::gemm_f32_pairs_bf16w,
                               avx512::f32_pair_rows,       avx512::gemm_f32_squares_rows};
    return ops;
}

namespace {

// Plain-function entries for the table, one set per ISA.
template <const IsaOps& (*Ops)()>
struct Entries {
    static void act_quant(const bf16* x, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales, ThreadPool& pool) {
        cpu::act_quant(Ops(), x, n, k, codes, scales, pool);
    }
    static void gemm_fp8(const Fp8Acts& a, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
        cpu::gemm_fp8(Ops(), a, w, out, ldo, pool);
    }
    static void gemm_fp8_f32(const Fp8Acts& a, const Fp8Matrix& w, float* out, int64_t ldo, ThreadPool& pool) {
        cpu::gemm_fp8_f32(Ops(), a, w, out, ldo, pool);
    }
    static void gemm_fp8_bf16x(const bf16* x, int64_t n, const Fp8Matrix& w, bf16* out, int64_t ldo,
                               ThreadPool& pool) {
        cpu::gemm_fp8_bf16x(Ops(), x, n, w, out, ldo, pool);
    }
    static void gemm_fp8_bf16x_grouped(const Fp8Bf16xGemm* gemms, int64_t count, ThreadPool& pool) {
        cpu::gemm_fp8_bf16x_grouped(Ops(), gemms, count, pool);
    }
    static void gemm_fp4(const Fp8Acts& a, const Fp4Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
        cpu::gemm_fp4(Ops(), a, w, out, ldo, pool);
    }
    static void gemm_fp4_grouped(const Fp4Gemm* gemms, int64_t count, ThreadPool& pool) {
        cpu::gemm_fp4_grouped(Ops(), gemms, count, pool);
    }
    static void gemm_bf16(const bf16* x, int64_t n, const Bf16Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
        cpu::gemm_bf16(Ops(), x, n, w, out, ldo, pool);
    }
    static void gemm_f32_bf16w(const float* x, int64_t n, const Bf16Matrix& w, float* out, int64_t ldo,
                               ThreadPool& pool) {
        cpu::gemm_f32_bf16w(Ops(), x, n, w, out, ldo, pool);
    }
    static void gemm_f32(const float* x, int64_t n, const F32Matrix& w, float* out, int64_t ldo, ThreadPool& pool) {
        cpu::gemm_f32(Ops(), x, n, w, out, ldo, pool);
    }
    static void gemm_f32_squares(const bf16* x, int64_t n, const F32Matrix& w, float* out, float* squares,
                                 ThreadPool& pool) {
        cpu::gemm_f32_squares(Ops(), x, n, w, out, squares, pool);
    }
    static void prepare_bf16(const Bf16Matrix& w, PackedWeight* out, ThreadPool& pool) {
        cpu::prepare_bf16(Ops(), w, out, pool);
    }
    static void sparse_attn(const bf16* q, int64_t m, int heads, int dim, const bf16* kv, const int32_t* idx, int topk,
                            const float* sink, float scale, bf16* out, ThreadPool& pool) {
        cpu::sparse_attn(Ops(), q, m, heads, dim, kv, idx, topk, sink, scale, out, pool);
    }
    static void index_scores(const bf16* q, int64_t m, int heads, int dim, const bf16* keys, int64_t n, const bf16* w,
                             float* out, int64_t ldo, ThreadPool& pool) {
        cpu::index_scores(Ops(), q, m, heads, dim, keys, n, w, out, ldo, pool);
    }
    static void index_scores_fp4(const uint8_t* q_records, int64_t m, int heads, int dim,
                                 const uint8_t* const* key_records, int64_t n, const bf16* w, float* out, int64_t ldo,
                                 ThreadPool& pool) {
        cpu::index_scores_fp4(Ops(), q_records, m, heads, dim, key_records, n, w, out, ldo, pool);
    }
    static void rms_norm(const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y, ThreadPool& pool) {
        cpu::rms_norm(Ops(), x, n, dim, w, eps, y, pool);
    }
    static void swiglu(const bf16* gate, const bf16* up, int64_t n, int inter, float limit, const float* row_weight,
                       bf16* h, ThreadPool& pool) {
        cpu::swiglu(Ops(), gate, up, n, inter, limit, row_weight, h, pool);
    }
    static void rope(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin,
                     bool inverse) {
        Ops().rope(x, count, stride, rope_dim, cos, sin, inverse);
    }
    static void pair_pool(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out) {
        Ops().pair_pool(u0, g0, u1, g1, dim, out);
    }
    static void hc_sinkhorn(const float* mixes, int64_t n, const float* scale, const float* base, int hc, int iters,
                            float eps, float* pre, float* post, float* comb, ThreadPool& pool) {
        cpu::hc_sinkhorn(Ops(), mixes, n, scale, base, hc, iters, eps, pre, post, comb, pool);
    }
    static void hc_collapse(const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y, ThreadPool& pool) {
        cpu::hc_collapse(Ops(), x, n, pre, hc, dim, y, pool);
    }
    static void hc_expand(const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb, int hc,
                          int dim, bf16* out, ThreadPool& pool) {
        cpu::hc_expand(Ops(), o, res, n, post, comb, hc, dim, out, pool);
    }
    static void topk_entries(const float* scores, int64_t width, int k, int32_t* out) {
        cpu::topk_entries(Ops(), scores, width, k, out);
    }
    static void gather_fp8_rows(const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows,
                                int64_t count, bf16* out, ThreadPool& pool) {
        cpu::gather_fp8_rows(Ops(), codes, scales, dim, rows, count, out, pool);
    }
    static void unpack_records(CacheRecord kind, const uint8_t* const* records, int64_t count, int dim, bf16* out,
                               ThreadPool& pool) {
        cpu::unpack_records(Ops(), kind, records, count, dim, out, pool);
    }
    static Kernels table(Isa isa) {
        return Kernels{.isa = isa,
                       .prepare_fp8 = prepare_fp8,
                       .prepare_fp4 = prepare_fp4,
                       .prepare_bf16 = prepare_bf16,
                       .act_quant = act_quant,
                       .gemm_fp8 = gemm_fp8,
                       .gemm_fp8_f32 = gemm_fp8_f32,
                       .gemm_fp8_bf16x = gemm_fp8_bf16x,
                       .gemm_fp8_bf16x_grouped = gemm_fp8_bf16x_grouped,
                       .gemm_fp4 = gemm_fp4,
                       .gemm_fp4_grouped = gemm_fp4_grouped,
                       .gemm_bf16 = gemm_bf16,
                       .gemm_f32_bf16w = gemm_f32_bf16w,
                       .gemm_f32 = gemm_f32,
                       .gemm_f32_squares = gemm_f32_squares,
                       .sparse_attn = sparse_attn,
                       .index_scores = index_scores,
                       .index_scores_fp4 = index_scores_fp4,
                       .rms_norm = rms_norm,
                       .swiglu = swiglu,
                       .rope = rope,
                       .pair_pool = pair_pool,
                       .hc_sinkhorn = hc_sinkhorn,
                       .hc_collapse = hc_collapse,
                       .hc_expand = hc_expand,
                       .topk_entries = topk_entries,
                       .gather_fp8_rows = gather_fp8_rows,
                       .unpack_records = unpack_records};
    }
};

}  // namespace

const Kernels* avx2_kernels() {
    const CpuFeatures& f = cpu_features();
    if (!(f.avx2 && f.fma && f.f16c)) return nullptr;
    static const Kernels table = Entries<avx2_ops>::table(Isa::kAvx2);
    return &table;
}

bool avx512_fp4_sums_on_tiles() { return avx512_kernels() && amx_enabled() && avx512::tile_unit_rounds_once(); }

const Kernels* avx512_kernels() {
    const CpuFeatures& f = cpu_features();
    if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16 && f.avx512_vbmi && f.avx512_vnni &&
          f.avx2 && f.fma))
        return nullptr;
    static const Kernels table = Entries<avx512_ops>::table(Isa::kAvx512);
    return &table;
}

}  // namespace deepinfer::backend::cpu
