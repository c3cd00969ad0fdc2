// Sparse attention's Q.K and P.V of a block of 64 kv rows on AMX tiles (spec §4.7; attention_amx.h).
//
// Why: on vdpbf16ps (attention_avx512.cpp) a block costs 64 x dim / 2 dot instructions per head for each
// product -- 2 x 16 384 per head at dim 512, ~2.3 cycles of both vector ports each on Intel's cores -- and
// sparse_attn was ~9% of a batch-16 decode step and of a 4096-token prefill of the released-dims layers. Here
// each product is 4 (Q.K, per 32 columns) or 2 (P.V, per 16 columns) tdpbf16ps of up to 16 heads.
//
// Numerics: bf16 products are exact in fp32; tdpbf16ps sums each 32 of them in its own order, and Q.K adds the
// dim / 32 partial sums in column order, P.V the two halves of the block in row order -- orders neither the
// reference's nor vdpbf16ps's (docs/numerics.md), the same for a head whatever the other heads of the tile, so a
// query's result does not depend on its batch or on how its heads are split. The rounding points stay the
// reference's: fp32 scores, bf16 probabilities, block_pv in fp32, acc * rescale + block_pv.
//
// Tiles: C at 0-3 (heads x 16 fp32), A at 4-5 (heads x 32 bf16: a query chunk, or half the block's
// probabilities), B at 6-7 (16 pairs x 16 dwords of the kv arrangement).
#include "backend/cpu/x86/avx512/attention_amx.h"

#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include "backend/cpu/x86/avx512/amx_tiles.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

constexpr int kBlock = 64;  // kv rows per block, as attention_avx512.cpp

// acc row h (16 columns) = acc * rescale[h] + the C tile's row h, for the configured heads.
inline void rescale_add(const float* c, float* acc, int64_t acc_stride, const float* rescale, int heads) {
    for (int h = 0; h < heads; ++h) {
        float* a = acc + h * acc_stride;
        _mm512_store_ps(a, _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(a), _mm512_set1_ps(rescale[h])),
                                         _mm512_load_ps(c + 16 * h)));
    }
}

}  // namespace

void attn_amx_configure(int heads) {
    TileConfig c;
    for (int t = 0; t < 6; ++t) c.set(t, heads, 64);
    for (int t = 6; t < 8; ++t) c.set(t, 16, 64);
    c.load();
}

void attn_amx_release() { _tile_release(); }

void qk_amx(const uint32_t* kt, int dim, const uint32_t* q, int64_t q_stride, float* s) {
    const int64_t a_stride = q_stride * 4;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int c = 0; c < dim / 32; ++c) {
        const uint32_t* b = kt + static_cast<int64_t>(16 * c) * kBlock;  // column pairs 16c.., rows t 0-63
        _tile_loadd(4, q + 16 * c, a_stride);
        _tile_loadd(6, b, kBlock * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, b + 16, kBlock * 4);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(6, b + 32, kBlock * 4);
        _tile_dpbf16ps(2, 4, 6);
        _tile_loadd(7, b + 48, kBlock * 4);
        _tile_dpbf16ps(3, 4, 7);
    }
    _tile_stored(0, s, kBlock * 4);
    _tile_stored(1, s + 16, kBlock * 4);
    _tile_stored(2, s + 32, kBlock * 4);
    _tile_stored(3, s + 48, kBlock * 4);
}

void pv_amx(const uint32_t* kp, int dim, const uint16_t* p, float* acc, const float* rescale, int heads) {
    alignas(64) float c[2][16 * 16];
    const int64_t b_stride = static_cast<int64_t>(dim) * 4;
    const uint32_t* kp_hi = kp + static_cast<int64_t>(kBlock / 4) * dim;  // row pairs 16-31: rows 32-63
    _tile_loadd(4, p, kBlock * 2);       // rows 0-31 of the block
    _tile_loadd(5, p + 32, kBlock * 2);  // rows 32-63
    // 16 columns at a time (dim / 16 is even), two C tiles in turn: chunk j's sums are stored and added while
    // chunk j + 1 multiplies.
    const int chunks = dim / 16;
    for (int j = 0; j < chunks; j += 2) {
        _tile_loadd(6, kp + 16 * j, b_stride);
        _tile_loadd(7, kp_hi + 16 * j, b_stride);
        _tile_zero(0);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(0, 5, 7);
        if (j > 0) {
            _tile_stored(1, c[1], 64);
            rescale_add(c[1], acc + 16 * (j - 1), dim, rescale, heads);
        }
        _tile_loadd(6, kp + 16 * (j + 1), b_stride);
        _tile_loadd(7, kp_hi + 16 * (j + 1), b_stride);
        _tile_zero(1);
        _tile_dpbf16ps(1, 4, 6);
        _tile_dpbf16ps(1, 5, 7);
        _tile_stored(0, c[0], 64);
        rescale_add(c[0], acc + 16 * j, dim, rescale, heads);
    }
    _tile_stored(1, c[1], 64);
    rescale_add(c[1], acc + 16 * (chunks - 1), dim, rescale, heads);
}

}  // namespace deepinfer::backend::cpu::avx512
