// The AMX tile peak for bench-ops: back-to-back tdpbf16ps on tiles held in registers, the ceiling of the kernels
// that run on tiles (the fp8 and MXFP4 GEMMs of 5+ rows, the head), as fma_loop / dot_loop are of the vector ones.
// Only called where amx_enabled().
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/amx_tiles.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {

// iters x 4 products of 16 x 32 by 32 x 16 bf16 into four independent C tiles (a 2 x 2 block, as the GEMMs
// use them), with A and B loaded once: the unit's rate alone, no loads. (Loading A and B every 4 products from L1
// read ~88% of this on the Intel Xeon of docs/PERFORMANCE.md, from L2 ~65%.)
float tile_loop(int64_t iters) {
    alignas(64) uint16_t ab[2][16 * 32];
    for (int i = 0; i < 16 * 32; ++i) ab[0][i] = 0x3f80, ab[1][i] = 0x3380;  // 1.0 and 2^-24 in bf16
    alignas(64) float c[16 * 16];
    configure_tile_pair(16, 16);
    zero_c_tiles<2>(0);
    zero_c_tiles<2>(1);
    _tile_loadd(4, ab[0], 64);
    _tile_loadd(5, ab[0], 64);
    _tile_loadd(6, ab[1], 64);
    _tile_loadd(7, ab[1], 64);
    for (int64_t it = 0; it < iters; ++it) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, 64);
    _tile_release();
    return c[0];
}

}  // namespace deepinfer::backend::cpu::avx512
