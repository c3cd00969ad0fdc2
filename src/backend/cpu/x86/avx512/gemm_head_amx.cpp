// gemm_f32_bf16w (fp32 x, bf16 W, fp32 out: the LM head, spec §3.4) on AMX tiles, for weights prepared as
// kBf16Tiles (backend/cpu/packing.h) on CPUs where amx_enabled().
//
// tdpbf16ps multiplies bf16 only, so each fp32 activation comes split exactly into three bf16 parts
// (split_bf16x3_rows, isa_ops.h: hi + mid + lo = x), each part's products with the bf16 weight are exact in fp32, and
// per 32-column block the tile adds the hi, mid and lo products in its own order into an fp32 accumulator that
// runs over the whole row (no per-block scale here). That is an fp32 dot product in another summation order, as
// every table's is (docs/numerics.md). A row's result does not depend on the other rows of its tile or on n: one
// kernel for every n, so rows stay invariant.
//
// Why: the FMA kernel (gemm_dense_avx512.cpp) is compute-bound from ~8 rows on at ~40-50% of the FMA peak. The
// released head (129280 x 5120, 2 threads, ~31 GB/s, bench-ops --only head): n = 8 74 -> 50 ms, n = 16 102 -> 52,
// n = 64 474 -> ~137; n = 1 and 4 at the bandwidth as before (46-48 ms), n = 2 4% slower (45 -> 47).
//
// Tiles: C at 0-2 (up to 16 activation rows, configured as many as the row tile has, x 16 weight rows of up to
// three row groups), the row tile's three planes as A at 4-6, the groups' blocks as B at 7 and 3 in turn. Per pass:
// one row tile against up to three groups, k in order; the groups' tiles (3 x 160 KB at k = 5 k) stay in L2 for the
// next row tile, and the row tile's planes (480 KB). (Four groups with one B register: a group's B load waited for
// the group before's last product, the tile unit running in order; three groups with two B registers taking turns,
// streamed by two threads: n = 8-32 0.89-0.97x the time, n = 64 0.92-1.00x; docs/PERFORMANCE.md, "Forty-third
// session".)
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/amx_tiles.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

constexpr int64_t kTileBytes = 1024;  // packing.h kBf16TileBytes
constexpr int kGroups = static_cast<int>(kBf16TilePassGroups);  // row groups per pass (C tiles)
static_assert(kGroups <= 3, "C tiles 0-2: tile 3 is the second B register");

// Q groups' C tiles += the row tile's planes (at a, k apart in bf16 rows of a_stride bytes) x block kb. Group q's B
// tile goes into register 7 or 3 by the parity of kb * Q + q (kOdd: kb * Q odd), so that it loads while the group
// before multiplies from the other register; each A plane is loaded right before group 0's product that reads it.
template <int Q, bool kOdd>
inline void multiply_block(const uint8_t* const* b, const uint16_t* hi, const uint16_t* mid, const uint16_t* lo,
                           int64_t a_stride) {
#define DEEPINFER_AMX_PRODUCTS(C, B) \
    _tile_dpbf16ps(C, 4, B);         \
    _tile_dpbf16ps(C, 5, B);         \
    _tile_dpbf16ps(C, 6, B)
#define DEEPINFER_AMX_GROUP(C, B) \
    _tile_loadd(B, b[C], 64);     \
    DEEPINFER_AMX_PRODUCTS(C, B)
#define DEEPINFER_AMX_FIRST(B)        \
    _tile_loadd(4, hi, a_stride);     \
    _tile_loadd(B, b[0], 64);         \
    _tile_dpbf16ps(0, 4, B);          \
    _tile_loadd(5, mid, a_stride);    \
    _tile_dpbf16ps(0, 5, B);          \
    _tile_loadd(6, lo, a_stride);     \
    _tile_dpbf16ps(0, 6, B)
    if constexpr (!kOdd) {
        DEEPINFER_AMX_FIRST(7);
        if constexpr (Q > 1) { DEEPINFER_AMX_GROUP(1, 3); }
        if constexpr (Q > 2) { DEEPINFER_AMX_GROUP(2, 7); }
    } else {
        DEEPINFER_AMX_FIRST(3);
        if constexpr (Q > 1) { DEEPINFER_AMX_GROUP(1, 7); }
        if constexpr (Q > 2) { DEEPINFER_AMX_GROUP(2, 3); }
    }
#undef DEEPINFER_AMX_FIRST
#undef DEEPINFER_AMX_GROUP
#undef DEEPINFER_AMX_PRODUCTS
}

// One pass: activation rows [i0, i0 + 16) against Q groups from group g (tiles at `tiles`), results to out.
template <int Q>
void pass(const DenseGemmTask& t, const uint16_t* planes, const uint8_t* tiles, int64_t g, int64_t i0,
          float* out) {
    const int64_t k = t.k, kb_count = k / 32;
    _tile_zero(0);
    if constexpr (Q > 1) _tile_zero(1);
    if constexpr (Q > 2) _tile_zero(2);
    const uint16_t* hi = planes + i0 * k;
    const uint16_t* mid = hi + t.n * k;  // (the planes hold only the task's rows: the tiles load m of them)
    const uint16_t* lo = mid + t.n * k;
    const uint8_t* b[kGroups];
    for (int q = 0; q < Q; ++q) b[q] = tiles + (g + q) * kb_count * kTileBytes;
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        // Each group's next tile into L1: a tileloadd of B waits for the products still reading the previous one,
        // so without it each tile's trip from L2 stood between them. n = 1 streamed at 85% of the bandwidth
        // (92-93% for the FMA kernel), with it 92-94%; 4 KB ahead 92%, to L2 (T1) or from 8 KB ahead no better.
        for (int q = 0; q < Q; ++q)
#pragma GCC unroll 16
            for (int line = 0; line < 16; ++line)
                _mm_prefetch(reinterpret_cast<const char*>(b[q] + kTileBytes + 64 * line), _MM_HINT_T0);
        if (Q % 2 && kb % 2) multiply_block<Q, true>(b, hi + 32 * kb, mid + 32 * kb, lo + 32 * kb, k * 2);
        else multiply_block<Q, false>(b, hi + 32 * kb, mid + 32 * kb, lo + 32 * kb, k * 2);
        for (int q = 0; q < Q; ++q) b[q] += kTileBytes;
    }
    alignas(64) float c[Q][16 * 16];
    _tile_stored(0, c[0], 64);
    if constexpr (Q > 1) _tile_stored(1, c[1], 64);
    if constexpr (Q > 2) _tile_stored(2, c[2], 64);
    const int rows = t.n - i0 < 16 ? static_cast<int>(t.n - i0) : 16;
    for (int q = 0; q < Q; ++q) {
        const int64_t cols = t.rows - (g + q) * 16;
        const __mmask16 mask = cols >= 16 ? 0xffff : static_cast<__mmask16>((1u << cols) - 1);
        for (int r = 0; r < rows; ++r)
            _mm512_mask_storeu_ps(out + (i0 + r) * t.ldo + (g + q) * 16, mask, _mm512_load_ps(c[q] + 16 * r));
    }
}

}  // namespace

void gemm_f32_bf16w_tiles(const DenseGemmTask& t) {
    const int64_t groups = (t.rows + 15) / 16;
    const auto* planes = static_cast<const uint16_t*>(t.x);
    const auto* tiles = static_cast<const uint8_t*>(t.w);
    auto* out = static_cast<float*>(t.out);
    // C and A tiles of the row tile's rows only (fewer rows, faster products: 1 row ~7 TSC cycles, 16 rows ~12.5
    // on this machine); a row's sums do not depend on how many rows its tile has.
    int configured = 0;
    for (int64_t g = 0; g < groups; g += kGroups) {
        const int64_t q = groups - g < kGroups ? groups - g : kGroups;
        for (int64_t i0 = 0; i0 < t.n; i0 += 16) {
            const int m = t.n - i0 < 16 ? static_cast<int>(t.n - i0) : 16;
            if (m != configured) {
                TileConfig config;
                for (int c = 0; c < 7; ++c) config.set(c, m, 64);
                config.set(7, 16, 64);
                config.set(3, 16, 64);  // (the second B register)
                config.load();
                configured = m;
            }
            if (q == 3) pass<3>(t, planes, tiles, g, i0, out);
            else if (q == 2) pass<2>(t, planes, tiles, g, i0, out);
            else pass<1>(t, planes, tiles, g, i0, out);
        }
    }
    _tile_release();
}

}  // namespace deepinfer::backend::cpu::avx512
