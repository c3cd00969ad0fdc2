// Drivers of the CPU kernel tables: argument checks, threading over the ThreadPool, per-thread scratch,
// packing of unprepared weights, and the hand-off to an ISA's routines (x86/isa_ops.h).
#pragma once

#include <functional>

#include "backend/cpu/x86/isa_ops.h"
#include "backend/kernels.h"

namespace deepinfer::backend::cpu {

void act_quant(const IsaOps& ops, const bf16* x, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales,
               ThreadPool& pool);
void gemm_fp8(const IsaOps& ops, const Fp8Acts& a, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
void gemm_fp8_f32(const IsaOps& ops, const Fp8Acts& a, const Fp8Matrix& w, float* out, int64_t ldo, ThreadPool& pool);
void gemm_fp8_bf16x(const IsaOps& ops, const bf16* x, int64_t n, const Fp8Matrix& w, bf16* out, int64_t ldo,
                    ThreadPool& pool);
void gemm_fp8_bf16x_grouped(const IsaOps& ops, const Fp8Bf16xGemm* gemms, int64_t count, ThreadPool& pool);
void gemm_fp4(const IsaOps& ops, const Fp8Acts& a, const Fp4Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool);
void gemm_fp4_grouped(const IsaOps& ops, const Fp4Gemm* gemms, int64_t count, ThreadPool& pool);
void gemm_bf16(const IsaOps& ops, const bf16* x, int64_t n, const Bf16Matrix& w, bf16* out, int64_t ldo,
               ThreadPool& pool);
// A kBf16Tiles layout where the ISA reads one (IsaOps::gemm_f32_bf16w_tiles and gemm_bf16_tiles, AMX granted), else
// none.
void prepare_bf16(const IsaOps& ops, const Bf16Matrix& w, PackedWeight* out, ThreadPool& pool);
void gemm_f32_bf16w(const IsaOps& ops, const float* x, int64_t n, const Bf16Matrix& w, float* out, int64_t ldo,
                    ThreadPool& pool);
void gemm_f32(const IsaOps& ops, const float* x, int64_t n, const F32Matrix& w, float* out, int64_t ldo,
              ThreadPool& pool);
void gemm_f32_squares(const IsaOps& ops, const bf16* x, int64_t n, const F32Matrix& w, float* out, float* squares,
                      ThreadPool& pool);
void sparse_attn(const IsaOps& ops, const bf16* q, int64_t m, int heads, int dim, const bf16* kv, const int32_t* idx,
                 int topk, const float* sink, float scale, bf16* out, ThreadPool& pool);
void index_scores(const IsaOps& ops, const bf16* q, int64_t m, int heads, int dim, const bf16* keys, int64_t n,
                  const bf16* w, float* out, int64_t ldo, ThreadPool& pool);
void index_scores_fp4(const IsaOps& ops, const uint8_t* q_records, int64_t m, int heads, int dim,
                      const uint8_t* const* key_records, int64_t n, const bf16* w, float* out, int64_t ldo,
                      ThreadPool& pool);
void rms_norm(const IsaOps& ops, const bf16* x, int64_t n, int dim, const bf16* w, float eps, bf16* y, ThreadPool& pool);
void swiglu(const IsaOps& ops, const bf16* gate, const bf16* up, int64_t n, int inter, float limit,
            const float* row_weight, bf16* h, ThreadPool& pool);
void hc_sinkhorn(const IsaOps& ops, const float* mixes, int64_t n, const float* scale, const float* base, int hc,
                 int iters, float eps, float* pre, float* post, float* comb, ThreadPool& pool);
void hc_collapse(const IsaOps& ops, const bf16* x, int64_t n, const float* pre, int hc, int dim, bf16* y,
                 ThreadPool& pool);
void hc_expand(const IsaOps& ops, const bf16* o, const bf16* res, int64_t n, const float* post, const float* comb,
               int hc, int dim, bf16* out, ThreadPool& pool);
void topk_entries(const IsaOps& ops, const float* scores, int64_t width, int k, int32_t* out);
void gather_fp8_rows(const IsaOps& ops, const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows,
                     int64_t count, bf16* out, ThreadPool& pool);
void unpack_records(const IsaOps& ops, CacheRecord kind, const uint8_t* const* records, int64_t count, int dim,
                    bf16* out, ThreadPool& pool);

// Work items per call: about 8 chunks per thread (at least min_chunk) balances a late thread without making chunks
// so small that the per-chunk setup (activation decode, panel builds) matters.
int64_t chunk_size(int64_t n, const ThreadPool& pool, int64_t min_chunk);

// The units of a GEMM on AMX tiles of more than one row tile of activations (fp8 on tiles, gemm_bf16 on tiles):
// each unit reads all of its activations again (n x k bf16, 2-4 MB at n = 256: per run of kTileRunPairs pairs on
// fp8, per pass of k on bf16), so about unit_pairs pairs of row groups a unit (fp8: kTileRunPairs; bf16:
// kBf16TileUnitPairs, whose sums wait in L2 beside a pass's activations), a multiple of the thread count of units (at
// most `pairs`). Sized like chunk_size on 16 threads, wo_b's fp8 units held one pair and wo_a's two, each re-reading
// the activations for 256-512 KB of weights (docs/PERFORMANCE.md, "Forty-second session": on 2 threads units of
// 1-2 pairs ran 1.25-1.5x slower than 5-16).
constexpr int64_t kBf16TileUnitPairs = 16;
int64_t tile_gemm_units(int64_t pairs, int64_t unit_pairs, const ThreadPool& pool);

// Run fn(begin, end, thread) over [0, n) in chunks of `chunk`, claimed as ThreadPool::run_claimed_chunks claims them
// (each thread an adjacent range in order, then chunks from the back of the fullest other range; a thread that
// has not started when the others are done runs none). setup(thread) runs on a thread before its first chunk. A
// pool of one thread runs fn(0, n, 0) once.
void for_chunks(ThreadPool& pool, int64_t n, int64_t chunk, const std::function<void(int)>& setup,
                const std::function<void(int64_t, int64_t, int)>& fn);

// Per-thread scratch, grown on demand and kept for the thread's lifetime (pool threads are long-lived).
struct ThreadScratch {
    AlignedBuffer acts, act_scales, fp4_row, gemm, dense, pack, attn, topk;
    AlignedBuffer bits_acts;    // IsaOps::fp8_bits_acts of acts
    AlignedBuffer planes;       // the calling thread's split_bf16x3_rows planes of a gemm_f32_bf16w on tiles
    AlignedBuffer f32_pairs;    // the calling thread's f32_pair_rows of a gemm_f32_bf16w (IsaOps::f32_pair_rows)
    AlignedBuffer pair_tiles;   // the calling thread's bf16_pair_tiles of a gemm_bf16 on tiles
    bool bits_acts_ok = false;  // ... and whether it accepted them
    AlignedBuffer tile_acts, tile_shift;  // IsaOps::fp8_tile_acts / fp4_tile_acts of acts and act_scales
    bool tile_acts_ok = false;            // ... and whether it took them
};
ThreadScratch& thread_scratch();

}  // namespace deepinfer::backend::cpu
