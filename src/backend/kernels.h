// The kernel table: every compute-heavy primitive the model needs, as plain function pointers over
// raw arrays, with one implementation per ISA (backend/ref = scalar truth, backend/cpu = AVX2 /
// AVX-512). ops/ validates shapes and calls through the table chosen at run time (cpuid or
// DEEPINFER_ISA). Semantics of each entry are those of the scalar reference in backend/ref, which
// follow the spec sections cited.
#pragma once

#include <cstdint>

#include "core/aligned_buffer.h"
#include "core/cpu_features.h"
#include "core/numeric.h"
#include "core/quant_records.h"
#include "core/thread_pool.h"
#include "core/weight_arena.h"

namespace deepinfer::backend {

// A quantized weight rearranged by a table's prepare_fp8 / prepare_fp4 for that table's GEMM: a
// self-contained, same-information copy (codes and scales) in a backend layout. The layouts are
// documented in backend/cpu/packing.h; kNone means the table reads the canonical checkpoint arrays.
enum class PackedLayout : uint32_t {
    kNone = 0,
    kFp8R16K4 = 1,  // fp8: 16-row groups, 64-byte chunks of 4 columns (backend/cpu/packing.h)
    kFp4R16K8 = 2,  // MXFP4: 16-row groups, 64-byte chunks of 8 columns (backend/cpu/packing.h)
    kBf16Tiles = 3,  // bf16: 16-row groups as AMX B tiles of 32 columns (backend/cpu/packing.h)
};
struct PackedWeight {
    PackedLayout layout = PackedLayout::kNone;
    int64_t rows = 0, cols = 0;
    // Where prepare_* puts the packed bytes: an arena shared with the model's other weights (streamed through
    // huge pages end to end, core/weight_arena.h) when set, else a buffer of this weight's own.
    WeightArena* arena = nullptr;
    uint8_t* data = nullptr;  // [size] bytes (packing.h), kLeadBytes readable bytes before them
    size_t size = 0;
    AlignedBuffer own;
    // Why a lead: the AVX2 fp8 decode of CPUs that issue ymm operations as two halves loads each 32 bytes of
    // codes one byte early too (backend/cpu/x86/avx2/fp8_bits_chunk.h Fp8BitsHalfRate; it reads prepared weights
    // only, those with plain_codes), so the byte before a packed stream must be mapped; 64 keeps the data 64-byte
    // aligned.
    static constexpr size_t kLeadBytes = 64;
    uint8_t* allocate(size_t bytes) {
        if (arena) {
            data = arena->allocate(kLeadBytes + bytes) + kLeadBytes;
        } else {
            own.allocate(kLeadBytes + bytes);
            data = own.data() + kLeadBytes;
        }
        size = bytes;
        return data;
    }
    // Every weight scale code is 1..254 (a normal power of two, never e8m0's 2^-127 or NaN), so a kernel may
    // widen the scales by a shift alone. Set by prepare_fp4.
    bool plain_scales = false;
    // fp8: no code is an e4m3 NaN (0x7f / 0xff), so a kernel may skip patching NaN codes. Set by prepare_fp8.
    bool plain_codes = false;
    // fp8: the subnormal-block flags follow the scales (backend/cpu/packing.h). Set by prepare_fp8.
    bool subnormal_flags = false;
};

// fp8 e4m3 weight [rows, cols] with e8m0 scales per 32x32 block: scales[ceil(rows/32), ceil(cols/32)].
// cols % 32 == 0 (it is the K of act_quant'd activations).
struct Fp8Matrix {
    const uint8_t* codes = nullptr;
    const uint8_t* scales = nullptr;
    int64_t rows = 0, cols = 0;
    // Optional: this weight after prepare_fp8 of the table in use. A kernel that reads the packed layout
    // ignores codes/scales (they may then be null); one that does not (the scalar table) reads them.
    const PackedWeight* prepared = nullptr;
};
// MXFP4 weight [rows, cols]: packed[rows, cols/2] (low nibble = even column), e8m0 scales[rows, cols/32].
struct Fp4Matrix {
    const uint8_t* packed = nullptr;
    const uint8_t* scales = nullptr;
    int64_t rows = 0, cols = 0;
    const PackedWeight* prepared = nullptr;  // as in Fp8Matrix
};
struct Bf16Matrix {
    const bf16* data = nullptr;  // [rows, cols]
    int64_t rows = 0, cols = 0;
    const PackedWeight* prepared = nullptr;  // Kernels::prepare_bf16's layout of it, when it made one
};
struct F32Matrix {
    const float* data = nullptr;  // [rows, cols]
    int64_t rows = 0, cols = 0;
};
// Activations quantized by act_quant (spec §4.2): e4m3 codes [n, k], e8m0 scales [n, k/32].
struct Fp8Acts {
    const uint8_t* codes = nullptr;
    const uint8_t* scales = nullptr;
    int64_t n = 0, k = 0;
};

// One GEMM of a grouped call (Kernels::gemm_fp4_grouped): out [a.n, w.rows] with row stride ldo.
struct Fp4Gemm {
    Fp8Acts a;
    Fp4Matrix w;
    bf16* out = nullptr;
    int64_t ldo = 0;
};

// One GEMM of a grouped gemm_fp8_bf16x call: x [n, w.cols] with row stride ldx (a column slice of a wider
// activation, as wo_a's groups read theirs), out [n, w.rows] with row stride ldo.
struct Fp8Bf16xGemm {
    const bf16* x = nullptr;
    int64_t n = 0, ldx = 0;
    Fp8Matrix w;
    bf16* out = nullptr;
    int64_t ldo = 0;
};

struct Kernels {
    Isa isa;
    // Repack a weight once (at load time) into this table's fast layout; out->layout stays kNone when the
    // table has none (scalar). GEMMs on unprepared weights are correct but repack on the fly (slower).
    void (*prepare_fp8)(const Fp8Matrix& w, PackedWeight* out, ThreadPool& pool);
    void (*prepare_fp4)(const Fp4Matrix& w, PackedWeight* out, ThreadPool& pool);
    // For gemm_f32_bf16w (the LM head) and gemm_bf16: a layout only where the table has kernels that read it
    // (AVX-512 with AMX: kBf16Tiles, from kBf16TilesMinRows rows); else out->layout stays kNone and the weight is
    // read as it is. Null in the reference.
    void (*prepare_bf16)(const Bf16Matrix& w, PackedWeight* out, ThreadPool& pool) = nullptr;
    // act_quant over rows of bf16 x [n, k] (k % 32 == 0): codes [n, k], scales [n, k/32].
    void (*act_quant)(const bf16* x, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales, ThreadPool& pool);
    // out[i, j] = bf16( sum_kb (sum_{k in kb} a[i,k] w[j,k]) * sa[i,kb] * sw[j/32,kb] ), K blocks in order
    // (spec §4.3 fp8_gemm). out row stride ldo.
    void (*gemm_fp8)(const Fp8Acts& a, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
    // gemm_fp8 without the final bf16 rounding: fp32 out (row-parallel partial sums under TP). May be null in
    // a SIMD table; ops falls back to the scalar reference then.
    void (*gemm_fp8_f32)(const Fp8Acts& a, const Fp8Matrix& w, float* out, int64_t ldo, ThreadPool& pool);
    // An fp8 weight against bf16 activations as they are (no act_quant): out[i, j] = bf16( sum_kb (sum_{k in
    // kb} x[i,k] w[j,k]) * sw[j/32,kb] ), K blocks in order. Each product is exact, so this is the bf16 GEMM
    // on the weight dequantized to bf16 (wo_a, spec §3.4 step 4, §5.3.7) but for the order of the fp32
    // sums (docs/numerics.md), read from the fp8 weight: half the bytes.
    void (*gemm_fp8_bf16x)(const bf16* x, int64_t n, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
    // Several gemm_fp8_bf16x in one dispatch (wo_a's output groups), each with its own call's results.
    void (*gemm_fp8_bf16x_grouped)(const Fp8Bf16xGemm* gemms, int64_t count, ThreadPool& pool);
    // Same with MXFP4 weights and per-row 1x32 weight scales (spec §4.3 fp4_gemm).
    void (*gemm_fp4)(const Fp8Acts& a, const Fp4Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
    // Several gemm_fp4 in one call (a step's routed experts: every selected expert's w1 and w3, then the w2s),
    // each with gemm_fp4's results; the work of all of them is split over the pool's threads at once.
    void (*gemm_fp4_grouped)(const Fp4Gemm* gemms, int64_t count, ThreadPool& pool);
    // bf16 x [n, k] times bf16 W [m, k]^T, fp32 accumulation, one rounding to bf16 (torch F.linear on bf16).
    void (*gemm_bf16)(const bf16* x, int64_t n, const Bf16Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
    // fp32 x [n, k] times W^T with W stored bf16 (exactly widened) or fp32; fp32 out.
    void (*gemm_f32_bf16w)(const float* x, int64_t n, const Bf16Matrix& w, float* out, int64_t ldo, ThreadPool& pool);
    void (*gemm_f32)(const float* x, int64_t n, const F32Matrix& w, float* out, int64_t ldo, ThreadPool& pool);
    // The mHC mixes' sums (spec §5.2) of n stream rows x bf16 [n, w.cols]: out [n, w.rows] = gemm_f32 of x in fp32
    // (exactly widened) and squares [n] = each row's sum of x^2, in fp32 with k in order from 0 and a separate
    // multiply and add per term, as gemm_f32 sums.
    void (*gemm_f32_squares)(const bf16* x, int64_t n, const F32Matrix& w, float* out, float* squares,
                             ThreadPool& pool);
    // Sparse attention with sink (spec §4.7) for one sequence: q bf16 [m, heads, dim], kv bf16 [n_kv, dim]
    // (K = V), idx int32 [m, topk] (-1 = empty), sink fp32 [heads]; out bf16 [m, heads, dim].
    void (*sparse_attn)(const bf16* q, int64_t m, int heads, int dim, const bf16* kv, const int32_t* idx, int topk,
                        const float* sink, float scale, bf16* out, ThreadPool& pool);
    // Indexer scores (spec §5.3.5): q bf16 [m, heads, dim], keys bf16 [n, dim], w bf16 [m, heads];
    // score[i, j] = bf16( sum_h bf16( relu(bf16(q_ih . k_j)) * w_ih ) ) stored as fp32 in out [m, ldo].
    void (*index_scores)(const bf16* q, int64_t m, int heads, int dim, const bf16* keys, int64_t n, const bf16* w,
                         float* out, int64_t ldo, ThreadPool& pool);
    // The same scores from index-key records (spec §5.3.5, §6.1: e2m1 x dim + an e8m0 scale per 32): q_records
    // [m * heads] records of index_key_record_bytes(dim), contiguous; key_records [n] pointers. By definition
    // index_scores of the unpacked values. A product of two e2m1 codes with power-of-two scales is exact, so the SIMD
    // tables sum each group of 32 in integers and add the group sums in fp32, in order: the reference's bits wherever
    // its fp32 sum over the dims is exact (the products' scales within about 2^9 of each other), else within a bf16
    // ulp (docs/numerics.md).
    void (*index_scores_fp4)(const uint8_t* q_records, int64_t m, int heads, int dim, const uint8_t* const* key_records,
                             int64_t n, const bf16* w, float* out, int64_t ldo, ThreadPool& pool);

    // ---- Row-wise ops (backend/ref/rowwise_ref.cpp states each one's exact semantics). ----
    // RMSNorm (spec §4.1) of rows of x [n, dim]: y = bf16(w * (x * (1 / sqrt(ss / dim + eps)))), where ss, the
    // fp32 sum of squares, is summed in 16 lanes (lane = k mod 16) joined by halving (lanes i and i + 8, then
    // i + 4, i + 2, i + 1): the order every table computes, so all tables agree bit for bit.
    void (*rms_norm)(const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y, ThreadPool& pool);
    // SwiGLU with the V4.1 clamps (spec §5.4, model.py Expert.forward) over gate/up bf16 [n, inter]: up clamped
    // to [-limit, limit] and gate to <= limit when limit > 0, h = bf16(silu(gate) * up), times row_weight[i]
    // when given (the routing weight, applied before w2).
    void (*swiglu)(const bf16* gate, const bf16* up, int64_t n, int inter, float limit, const float* row_weight,
                   bf16* h, ThreadPool& pool);
    // RoPE rotation (spec §4.6) in place of `count` vectors (the first rope_dim lanes at x + v * stride):
    // adjacent lanes (2i, 2i + 1) rotated in fp32 by (cos[i], sin[i]), or by the conjugate when inverse.
    // rope_dim even, <= 512 (ops::Rope checks it).
    void (*rope)(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin,
                 bool inverse);
    // Ratio-2 compressor pooling (spec §5.3.4) of one pair: per lane, a softmax over the two tokens' gates
    // weights their values: out[k] = bf16(u0 * (e0 / (e0 + e1)) + u1 * (e1 / (e0 + e1))), e = exp(g - max).
    void (*pair_pool)(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out);
    // hc_split_sinkhorn (spec §4.8) of n rows: mixes fp32 [n, (2 + hc) * hc]; scale [3]; base [(2 + hc) * hc];
    // pre, post [n, hc]; comb [n, hc, hc] with comb[i * hc + j] the weight of input copy i into output copy j.
    void (*hc_sinkhorn)(const float* mixes, int64_t n, const float* scale, const float* base, int hc, int iters,
                        float eps, float* pre, float* post, float* comb, ThreadPool& pool);
    // mHC stream collapse (spec §5.2) of n rows: y[i, k] = bf16( sum_c pre[i, c] * x[i, c, k] ), terms added to
    // 0 in copy order. x bf16 [n, hc, dim], pre [n, hc], y [n, dim].
    void (*hc_collapse)(const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y, ThreadPool& pool);
    // mHC expansion (spec §5.2): out[i, j, k] = bf16( post[i, j] * o[i, k] + sum_c comb[i, c, j] * res[i, c, k] ),
    // the sum added to 0 in copy order first. o [n, dim], res / out [n, hc, dim], post [n, hc], comb [n, hc, hc].
    void (*hc_expand)(const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb, int hc,
                      int dim, bf16* out, ThreadPool& pool);
    // Indexer top-k of one row (spec §5.3.5): the k best of scores[0, width) (k <= width) by (score descending,
    // entry ascending), NaN above +inf and -0 equal to +0, written as entry numbers in ascending order.
    void (*topk_entries)(const float* scores, int64_t width, int k, int32_t* out);
    // Engram row gather (spec §5.5.2): out[i, :] = bf16(e4m3(codes[rows[i], :]) * e8m0(scales[rows[i], k / 32]))
    // for i < count (a NaN scale makes its 32 values that NaN); codes [*, dim], scales [*, dim / 32], dim % 32 == 0.
    void (*gather_fp8_rows)(const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows,
                            int64_t count, bf16* out, ThreadPool& pool);
    // Cache records to their bf16 values (spec §6.1): out[r, :] = unpack_*_record(records[r]) (core/quant_records.h)
    // for r < count, bit for bit. dim % 32 == 0. A decode step unpacks its layer's window ring and selected
    // compressed entries, and every index key of the sequence (O(context)) for each indexer.
    void (*unpack_records)(CacheRecord kind, const uint8_t* const* records, int64_t count, int dim, bf16* out,
                           ThreadPool& pool);
};

// Table for one ISA (must be supported by this CPU), and the table in use (active_isa()).
const Kernels& kernels_for(Isa isa);
const Kernels& active_kernels();

namespace ref {
const Kernels& kernels();
}
namespace cpu {
// nullptr when the ISA's kernels are not compiled in.
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();
// Whether the AVX-512 table's MXFP4 GEMM of 5+ rows sums over all of k on AMX tiles: AMX in use and the tile unit
// found to round once per tdpbf16ps (docs/numerics.md); where it is not, that GEMM sums per block, to the same bits.
bool avx512_fp4_sums_on_tiles();
}  // namespace cpu

}  // namespace deepinfer::backend
