// The tile configuration of the AVX-512 table's AMX kernels (gemm_amx.cpp, gemm_fp8_amx.cpp, attention_amx.cpp,
// gemm_head_amx.cpp): palette 1, per tile register its rows and bytes per row.
#pragma once

#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

namespace deepinfer::backend::cpu::avx512 {

struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {};
    uint8_t rows[16] = {};

    void set(int tile, int tile_rows, int row_bytes) {
        rows[tile] = static_cast<uint8_t>(tile_rows);
        bytes_per_row[tile] = static_cast<uint16_t>(row_bytes);
    }
    // ldtilecfg reads all 64 bytes: GCC 12's _tile_loadconfig names only the first 8 as its memory operand, so
    // the stores to the rest could be dropped (seen: tileloadd faulted on an unconfigured tile).
#ifdef DEEPINFER_EMULATE_AMX
    void load() const { _tile_loadconfig(this); }
#else
    void load() const { __asm__ volatile("ldtilecfg %0" : : "m"(*this)); }
#endif
};

// The block-scaled GEMMs' two row tiles (m0 and m1 <= 16 rows; m1 = 0: one) against a pair of row groups (gemm_amx.cpp,
// gemm_fp8_amx.cpp): C of row tile i and group g at 2 i + g, A of tile i at 4 + i, B of group g at 6 + g (16 rows of
// 64 bytes).
inline void configure_tile_pair(int m0, int m1) {
    TileConfig c;
    const int rows[2] = {m0, m1};
    for (int i = 0; i < 2; ++i) {
        for (int g = 0; g < 2; ++g) c.set(2 * i + g, rows[i], rows[i] ? 64 : 0);
        c.set(4 + i, rows[i], rows[i] ? 64 : 0);
        c.set(6 + i, 16, 64);
    }
    c.load();
}

// configure_tile_pair's C tiles of row tile i (its G groups): zeroed, stored to c[g], loaded from c[g] (16 x 16
// floats each). (GCC's tile intrinsics take the register numbers as literals.)
template <int G>
inline void zero_c_tiles(int i) {
    if (i == 0) {
        _tile_zero(0);
        if constexpr (G == 2) _tile_zero(1);
    } else {
        _tile_zero(2);
        if constexpr (G == 2) _tile_zero(3);
    }
}
template <int G>
inline void store_c_tiles(int i, float (*c)[256]) {
    if (i == 0) {
        _tile_stored(0, c[0], 64);
        if constexpr (G == 2) _tile_stored(1, c[1], 64);
    } else {
        _tile_stored(2, c[0], 64);
        if constexpr (G == 2) _tile_stored(3, c[1], 64);
    }
}
template <int G>
inline void load_c_tiles(int i, float (*c)[256]) {
    if (i == 0) {
        _tile_loadd(0, c[0], 64);
        if constexpr (G == 2) _tile_loadd(1, c[1], 64);
    } else {
        _tile_loadd(2, c[0], 64);
        if constexpr (G == 2) _tile_loadd(3, c[1], 64);
    }
}

// The first block of a row pair's pass over a chunk of k (configure_tile_pair's registers; two row tiles, a1 null:
// one) with the C tiles changing hands inside it: the previous pair's (two row tiles, always) go out to out0[g] /
// out1[g] and this pair's come in from in0[g] / in1[g] (zeroed instead where `zero`; in1 unused where a1 is null),
// each C tile stored and reloaded right before its first product here, and each operand loaded right before the
// first product that reads it. The tile unit runs its instructions in order, a C store waits for the tile's last
// product, and a register is reloaded only once the products reading it are done: after four stores and then four
// loads, the first product waited for all of them; here it waits for one C tile. A scratch loop of the fp8 kernel's
// pattern (16 row tiles, chunks of 8 blocks, one core) ran 95 TSC cycles per four products the first way, 84 this
// way, 68 with no C tiles leaving the unit; gemm_bf16_amx.cpp, streamed by two threads, n = 64 0.85-0.87x the time,
// n = 256-1024 0.92-0.98x. The fp8 and MXFP4 kernels, whose passes have decode work between them, were no faster
// so (docs/PERFORMANCE.md, "Forty-third session"). kStreamA: A by tileloaddt1.
template <int G, bool kStreamA = false>
inline void multiply_tile_block_swapping(const void* a0, const void* a1, const void* b0, const void* b1,
                                         float (*out0)[256], float (*out1)[256], float (*in0)[256],
                                         float (*in1)[256], bool zero) {
#define DI_SWAP_TILE(tile, out, in)  \
    _tile_stored(tile, out, 64);     \
    if (zero) _tile_zero(tile);      \
    else _tile_loadd(tile, in, 64);
    DI_SWAP_TILE(0, out0[0], in0[0])
    if constexpr (kStreamA) _tile_stream_loadd(4, a0, 64);
    else _tile_loadd(4, a0, 64);
    _tile_loadd(6, b0, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (G == 2) {
        DI_SWAP_TILE(1, out0[1], in0[1])
        _tile_loadd(7, b1, 64);
        _tile_dpbf16ps(1, 4, 7);
    }
    if (!a1) {
        _tile_stored(2, out1[0], 64);
        if constexpr (G == 2) _tile_stored(3, out1[1], 64);
        return;
    }
    DI_SWAP_TILE(2, out1[0], in1[0])
    if constexpr (kStreamA) _tile_stream_loadd(5, a1, 64);
    else _tile_loadd(5, a1, 64);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (G == 2) {
        DI_SWAP_TILE(3, out1[1], in1[1])
        _tile_dpbf16ps(3, 5, 7);
    }
#undef DI_SWAP_TILE
}

}  // namespace deepinfer::backend::cpu::avx512
