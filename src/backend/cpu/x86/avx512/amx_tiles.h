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

}  // namespace deepinfer::backend::cpu::avx512
