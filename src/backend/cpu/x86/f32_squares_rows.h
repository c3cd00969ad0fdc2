// The row loop of IsaOps::gemm_f32_squares_rows, shared by the SIMD tables (avx2/gemm_f32_avx2.cpp,
// avx512/gemm_dense_avx512.cpp): tiles of kTileRows rows of x against the weight rows in groups of kLanes lanes,
// each tile's first group taking kLanes - ra weight rows and the tile's own ra rows, whose lanes then hold their sums
// of squares (each table's f32_ordered_tile: lane valid + a of row a is x[a] * x[a] added in k order from 0).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/numeric.h"

namespace deepinfer::backend::cpu {
// Internal linkage: every ISA translation unit gets its own copy (isa_ops.h: the ISA TUs share no COMDAT symbol).
namespace {

// tile(w, valid, xi, ra, own, lanes): rows [0, ra) of xi against weight rows [0, valid) of w and, where own > 0, the
// tile's own rows after them; row a's kLanes sums to lanes[a].
template <int kLanes, int kTileRows, class Tile>
inline void f32_squares_rows(const bf16* x, int64_t n, int64_t k, const float* fn, int64_t fn_rows, float* out,
                             int64_t ldo, float* squares, const Tile& tile) {
    if (fn_rows == 0 && !squares) return;
    for (int64_t i = 0; i < n; i += kTileRows) {
        const int64_t ra = std::min<int64_t>(n - i, kTileRows);
        int64_t j = 0;
        do {  // (once with no weight rows: the squares alone)
            const int own = j == 0 && squares ? static_cast<int>(ra) : 0;
            const int64_t valid = std::min<int64_t>(fn_rows - j, kLanes - own);
            alignas(64) float lanes[kTileRows][kLanes];
            tile(fn + j * k, valid, x + i * k, ra, own, lanes);
            for (int64_t a = 0; a < ra; ++a) {
                std::copy(lanes[a], lanes[a] + valid, out + (i + a) * ldo + j);
                if (own > 0) squares[i + a] = lanes[a][valid + a];
            }
            j += valid;
        } while (j < fn_rows);
    }
}

}  // namespace
}  // namespace deepinfer::backend::cpu
