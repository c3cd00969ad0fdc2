// The tile configuration of the AVX-512 table's AMX kernels (gemm_amx.cpp, attention_amx.cpp, gemm_head_amx.cpp):
// palette 1, per tile register its rows and bytes per row.
#pragma once

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
    void load() const { __asm__ volatile("ldtilecfg %0" : : "m"(*this)); }
};

}  // namespace deepinfer::backend::cpu::avx512
