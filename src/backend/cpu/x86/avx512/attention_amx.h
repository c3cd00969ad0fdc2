// Sparse attention's two products per block of 64 kv rows on AMX tiles (attention_amx.cpp), for CPUs where
// core/cpu_features.h amx_enabled(). They read the arrangements attention_avx512.cpp makes for its vdpbf16ps
// tiles, which are B tiles of tdpbf16ps as they lie: the kv block transposed by column pairs for Q.K, by row
// pairs for P.V. The lightning indexer's scores take qk_amx too (attention_avx512.cpp index_scores).
#pragma once

#include <cstdint>

namespace deepinfer::backend::cpu::avx512 {

// Tile shapes for heads rows of queries (<= 16): call before the products (and again when heads changes),
// release once after them.
void attn_amx_configure(int heads);
void attn_amx_release();

// s[h][t] (64 fp32 a head) = sum over dim columns of q[h, c] kv[t, c], for the configured heads: q the heads'
// bf16 rows as column pairs (q_stride dwords apart), kt the block as [dim / 2][64] column pairs.
void qk_amx(const uint32_t* kt, int dim, const uint32_t* q, int64_t q_stride, float* s);

// acc[h] (dim fp32, unpack order) = acc[h] * rescale[h] + sum over the 64 rows t of p[h, t] kv[t] for h < heads
// (those configured): two roundings as in the reference; p the heads' bf16 probabilities ([h][64]), kp the
// block as [32][dim] row pairs.
void pv_amx(const uint32_t* kp, int dim, const uint16_t* p, float* acc, const float* rescale, int heads);

}  // namespace deepinfer::backend::cpu::avx512
