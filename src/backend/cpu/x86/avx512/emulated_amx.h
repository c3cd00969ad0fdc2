// Emulated AMX tiles (CMake option DEEPINFER_EMULATE_AMX, preset amxemu; also on in the emulated AVX-512 build): the
// tile intrinsics of the AVX-512 table's AMX kernels (gemm_amx.cpp, gemm_fp8_amx.cpp, gemm_fp4_amx_sums.cpp,
// gemm_bf16_amx.cpp, gemm_head_amx.cpp, attention_amx.cpp, probe_amx.cpp) done in C++ on a thread's eight emulated
// tile registers, so that those kernels run -- and the op and model tests check them against the scalar reference
// and the goldens -- on a CPU without AMX. Test-only: scalar, far slower than the tile unit, never the product build.
//
// Semantics, after the SDM's pseudo-code for palette 1: ldtilecfg sets each tile's rows and bytes per row and zeroes
// the tiles; tileloadd fills the configured rows and bytes and zeroes the rest; tilestored writes the configured part;
// tdpbf16ps adds to C[m][n] the products A[m][2k + i] x B[k][2n + i] over the configured k, bf16 denormal inputs
// taken as zero and denormal results flushed (DAZ / FTZ). The order and rounding of that sum are not the
// pseudo-code's pair by pair: the Intel Xeon of docs/PERFORMANCE.md ("Eighteenth session") adds all of one
// instruction's products to C with one rounding where their partial sums are exact, which gemm_fp4_amx_sums.cpp
// checks once per process (probe_tile_rounding) and relies on; the emulation sums the products in double (exact for
// such operands) and rounds C + sum once, so that every AMX kernel the Xeon runs runs here too.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/numeric.h"

namespace deepinfer::emulated_amx {

struct Tiles {
    uint8_t rows[8] = {};
    uint16_t row_bytes[8] = {};
    alignas(64) uint8_t data[8][16][64] = {};
};
inline thread_local Tiles tiles;

// The 64-byte palette-1 configuration: palette at byte 0, bytes per row (uint16) of tile t at 16 + 2 t, rows at 48 + t.
inline void load_config(const void* config) {
    const auto* c = static_cast<const uint8_t*>(config);
    tiles = Tiles{};
    for (int t = 0; t < 8; ++t) {
        tiles.row_bytes[t] = static_cast<uint16_t>(c[16 + 2 * t] | c[17 + 2 * t] << 8);
        tiles.rows[t] = c[48 + t];
    }
}

inline void release() { tiles = Tiles{}; }

inline void zero(int t) { std::memset(tiles.data[t], 0, sizeof(tiles.data[t])); }

inline void load(int t, const void* base, long stride) {
    zero(t);
    for (int r = 0; r < tiles.rows[t]; ++r)
        std::memcpy(tiles.data[t][r], static_cast<const uint8_t*>(base) + r * stride, tiles.row_bytes[t]);
}

inline void store(int t, void* base, long stride) {
    for (int r = 0; r < tiles.rows[t]; ++r)
        std::memcpy(static_cast<uint8_t*>(base) + r * stride, tiles.data[t][r], tiles.row_bytes[t]);
}

inline bool denormal(float v) { return v != 0.0f && std::fabs(v) < 0x1p-126f; }

// Element j of a tile row: bf16 (as fp32, denormals as zero) or fp32.
inline float bf16_at(int t, int r, int j) {
    bf16 h;
    std::memcpy(&h.bits, tiles.data[t][r] + 2 * j, 2);
    const float v = bf16_to_float(h);
    return denormal(v) ? 0.0f : v;
}

inline void dpbf16ps(int c, int a, int b) {
    const int m_rows = tiles.rows[c], n_cols = tiles.row_bytes[c] / 4, k_pairs = tiles.row_bytes[a] / 4;
    for (int m = 0; m < m_rows; ++m)
        for (int n = 0; n < n_cols; ++n) {
            double sum = 0.0;
            for (int k = 0; k < k_pairs; ++k)
                for (int i = 0; i < 2; ++i)
                    sum += static_cast<double>(bf16_at(a, m, 2 * k + i)) * bf16_at(b, k, 2 * n + i);
            float acc;
            std::memcpy(&acc, tiles.data[c][m] + 4 * n, 4);
            if (denormal(acc)) acc = std::copysign(0.0f, acc);
            float out = static_cast<float>(static_cast<double>(acc) + sum);
            if (denormal(out)) out = std::copysign(0.0f, out);
            std::memcpy(tiles.data[c][m] + 4 * n, &out, 4);
        }
}

}  // namespace deepinfer::emulated_amx

// GCC's tile intrinsics are macros over the real instructions (amxtileintrin.h, amxbf16intrin.h); these replace them.
#undef _tile_loadconfig
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_release
#undef _tile_dpbf16ps
#define _tile_loadconfig(config) ::deepinfer::emulated_amx::load_config(config)
#define _tile_loadd(t, base, stride) ::deepinfer::emulated_amx::load(t, base, stride)
#define _tile_stream_loadd(t, base, stride) ::deepinfer::emulated_amx::load(t, base, stride)
#define _tile_stored(t, base, stride) ::deepinfer::emulated_amx::store(t, base, stride)
#define _tile_zero(t) ::deepinfer::emulated_amx::zero(t)
#define _tile_release() ::deepinfer::emulated_amx::release()
#define _tile_dpbf16ps(c, a, b) ::deepinfer::emulated_amx::dpbf16ps(c, a, b)
