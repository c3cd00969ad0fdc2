// AVX2 fp32-weight GEMMs in the reference's exact order: gemm_f32 (fp32 x) and the mHC mixes with their statistic,
// gemm_f32_squares (bf16 x, spec §5.2). They carry the mixes whose Sinkhorn output steers every residual stream, so
// they compute what backend/ref computes bit for bit: k in order from 0, a separate multiply and add per term (the
// reference is built with -ffp-contract=off, and so is this), each row's sum of squares the same chain of x * x.
// Few activation rows put 8 weight rows in the lanes (transposed in registers 8 columns at a time), tiles of up to 4
// rows; whole tiles of kF32LaneRows (16) rows put the rows in the lanes instead, two halves of 8, against up to 24
// weight rows whose columns are transposed once per chunk of k into a buffer (the AVX-512 kernel's plan,
// gemm_dense_avx512.cpp, at half the width).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/f32_squares_rows.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return bf16_to_float(v); }
// 8 values of a row from p as fp32 (bf16 widened exactly)
inline __m256 load_row8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load_row8(const bf16* p) { return load_bf16(reinterpret_cast<const uint16_t*>(p)); }

// w * broadcast(*x), the broadcast loaded where the product needs it: with _mm256_broadcast_ss GCC 12 hoisted a
// tile step's 32 broadcasts and spilled them (16 ymm registers, 12 taken by the transposed block and the sums).
inline __m256 mul_bcast(__m256 w, const float* x) {
    __m256 b;
    __asm__("vbroadcastss %1, %0" : "=x"(b) : "m"(*x));
    return _mm256_mul_ps(w, b);
}

// ---- few rows: weight rows in the lanes ----------------------------------------------------------------------
// R (<= 4) rows of x against weight rows [0, valid) of w, each output's chain in lane r of acc[a]. With `own` > 0 the
// lanes [valid, valid + own) hold rows [0, own) of x itself as weight rows (own <= R, valid + own <= 8): lane
// valid + a of acc[a] is then row a's sum of squares, x * x then the add with k in order from 0 -- the mHC
// statistic's chain, beside the sums instead of a pass of its own (gemm_f32_squares_rows).
template <int R, class X>
void f32_ordered_tile(const float* w, int64_t k, int64_t valid, const X* x, int own, __m256 (&acc)[4]) {
#pragma GCC unroll 4
    for (int a = 0; a < R; ++a) acc[a] = _mm256_setzero_ps();
    int64_t col = 0;
    for (; col + 8 <= k; col += 8) {
        // Up to 2 rows (at the bus) each weight row's line 4 KB ahead into L2, as on AVX-512. In-process A/B (Zen 4,
        // the mixes): n = 1 0.84-0.85x the time, n = 2 0.94-0.96x (one and two threads); n = 4-8 1.01x.
        if (R <= 2 && col % 16 == 0)
            for (int64_t r = 0; r < valid; ++r)
                _mm_prefetch(reinterpret_cast<const char*>(w + r * k + col + 1024), _MM_HINT_T1);
        __m256 blk[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r)
            blk[r] = r < valid         ? _mm256_loadu_ps(w + r * k + col)
                     : r < valid + own ? load_row8(x + (r - valid) * k + col)
                                       : _mm256_setzero_ps();
        transpose8(blk);
        // the rows' 8 values as fp32, broadcast from memory (bf16 rows widened once here, as on AVX-512)
        alignas(32) float widened[R][8];
        const float* xr[R];
#pragma GCC unroll 4
        for (int a = 0; a < R; ++a) {
            if constexpr (std::is_same_v<X, float>) {
                xr[a] = x + a * k + col;
            } else {
                _mm256_store_ps(widened[a], load_row8(x + a * k + col));
                xr[a] = widened[a];
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c)
#pragma GCC unroll 4
            for (int a = 0; a < R; ++a)
                acc[a] = _mm256_add_ps(acc[a], mul_bcast(blk[c], xr[a] + c));
    }
    for (; col < k; ++col) {
        alignas(32) float column[8] = {};
        for (int64_t r = 0; r < valid; ++r) column[r] = w[r * k + col];
        for (int r = 0; r < own; ++r) column[valid + r] = to_f32(x[r * k + col]);
        const __m256 wc = _mm256_load_ps(column);
#pragma GCC unroll 4
        for (int a = 0; a < R; ++a)
            acc[a] = _mm256_add_ps(acc[a], _mm256_mul_ps(wc, _mm256_set1_ps(to_f32(x[a * k + col]))));
    }
}

// ra (1-4) rows of x against weight rows [0, valid) of w, `own` of them with their squares (f32_ordered_tile).
template <class X>
void f32_ordered_rows(const float* w, int64_t k, int64_t valid, const X* x, int64_t ra, int own, __m256 (&acc)[4]) {
    switch (ra) {
        case 4: f32_ordered_tile<4>(w, k, valid, x, own, acc); break;
        case 3: f32_ordered_tile<3>(w, k, valid, x, own, acc); break;
        case 2: f32_ordered_tile<2>(w, k, valid, x, own, acc); break;
        default: f32_ordered_tile<1>(w, k, valid, x, own, acc); break;
    }
}

// ---- whole tiles of 16 rows: the rows in the lanes -------------------------------------------------------------
// Up to kLaneSums weight rows at once, in groups of at most kGroupSums whose sums, a column of x, the squares' chain
// and a product fill the 16 ymm registers.
constexpr int kLaneSums = 24;
constexpr int kGroupSums = 12;
constexpr int kHalfRows = 8;  // a tile's rows in one register's lanes
static_assert(kF32LaneRows == 2 * kHalfRows, "a tile of activation rows is two registers' lanes");
// The weights go through in chunks of kLaneChunkCols columns, transposed once into a buffer (12 KB, in L1 with a
// half tile's columns, 4 KB) for up to kLaneTiles row tiles: each column's weights then lie side by side, broadcast
// from one pointer at fixed offsets (the AVX-512 kernel's measure: the rows read in place, 80 KB apart, all in one
// L1 set, took 1.5x the time).
constexpr int64_t kLaneChunkCols = 128;
constexpr int kLaneTiles = 4;

// wt[c][j] = w[j][col0 + c] for the chunk's `width` columns, j < J (zero past `valid`): 8 x 8 blocks transposed in
// registers.
template <int J>
void transpose_chunk(const float* w, int64_t k, int64_t valid, int64_t col0, int64_t width, float (*wt)[J]) {
    static_assert(J % 8 == 0, "whole blocks of 8 weight rows");
    int64_t c0 = 0;
    for (; c0 + 8 <= width; c0 += 8)
        for (int j0 = 0; j0 < J; j0 += 8) {
            __m256 blk[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; ++r)
                blk[r] = j0 + r < valid ? _mm256_loadu_ps(w + (j0 + r) * k + col0 + c0) : _mm256_setzero_ps();
            transpose8(blk);
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) _mm256_store_ps(wt[c0 + c] + j0, blk[c]);
        }
    for (; c0 < width; ++c0)
        for (int j = 0; j < J; ++j) wt[c0][j] = j < valid ? w[j * k + col0 + c0] : 0.0f;
}

// Request the lines of `rows` rows (row stride k) over columns [col0, col1) into L2.
template <class T>
inline void request_rows(const T* p, int rows, int64_t k, int64_t col0, int64_t col1) {
    for (int r = 0; r < rows; ++r)
        for (int64_t c = col0; c < col1; c += 64 / static_cast<int64_t>(sizeof(T)))
            _mm_prefetch(reinterpret_cast<const char*>(p + r * k + c), _MM_HINT_T1);
}

// columns[c][r] = x[r][col0 + c] for 8 rows of x (row stride k) over `width` columns, as fp32; and the same rows'
// next chunk requested: 16-64 rows from 40 KB apart, a chunk of each at a time, are more streams than the hardware
// prefetchers follow (one core, 256 rows: the transposes stalled on these loads for a third of the kernel's time).
template <class X>
void transpose_rows(const X* x, int64_t k, int64_t col0, int64_t width, float (*columns)[kHalfRows]) {
    request_rows(x, kHalfRows, k, col0 + width, std::min(k, col0 + width + kLaneChunkCols));
    int64_t c0 = 0;
    for (; c0 + 8 <= width; c0 += 8) {
        __m256 blk[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) blk[r] = load_row8(x + r * k + col0 + c0);
        transpose8(blk);
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) _mm256_store_ps(columns[c0 + c], blk[c]);
    }
    for (; c0 < width; ++c0)
        for (int r = 0; r < kHalfRows; ++r) columns[c0][r] = to_f32(x[r * k + col0 + c0]);
}

// One group of G weight rows (wt's columns j0 .. j0 + G) over a half tile's chunk: sums[g][r] += x[r][c] * w[g][c]
// column by column, and with kSquares sq[r] += x[r][c] * x[r][c] beside them.
template <int J, int G, bool kSquares>
void group_over_chunk(const float (*columns)[kHalfRows], const float (*wt)[J], int j0, int64_t width, bool first,
                      float (*sums)[kHalfRows], float* sq) {
    __m256 acc[G], s = _mm256_setzero_ps();
#pragma GCC unroll 12
    for (int g = 0; g < G; ++g) acc[g] = first ? _mm256_setzero_ps() : _mm256_load_ps(sums[g]);
    if (kSquares && !first) s = _mm256_load_ps(sq);
    for (int64_t c = 0; c < width; ++c) {
        const __m256 xc = _mm256_load_ps(columns[c]);
        const float* wc = wt[c] + j0;
#pragma GCC unroll 12
        for (int g = 0; g < G; ++g) acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(xc, _mm256_broadcast_ss(wc + g)));
        if constexpr (kSquares) s = _mm256_add_ps(s, _mm256_mul_ps(xc, xc));
    }
#pragma GCC unroll 12
    for (int g = 0; g < G; ++g) _mm256_store_ps(sums[g], acc[g]);
    if constexpr (kSquares) _mm256_store_ps(sq, s);
}

// Row tiles [0, tiles) of 16 rows of x (row stride k) against the weight rows w[0..valid) (row stride k, valid <= J
// <= kLaneSums): out[(16 i + r) * ldo + j]; with kSquares also each row's sum of squares, in order, to
// squares[16 i + r].
template <int J, bool kSquares, class X>
void rows_in_lanes(const X* x, int64_t k, int tiles, const float* w, int64_t valid, float* out, int64_t ldo,
                   float* squares) {
    constexpr int kHalves = kLaneTiles * 2;
    constexpr int G = J <= kGroupSums ? J : J / 2;  // J is 8, 12, 16 or 24: one group, or two of 8 or 12
    static_assert(G <= kGroupSums && J % G == 0, "groups that fit the registers");
    constexpr int JW = (J + 7) / 8 * 8;                     // wt's rows: whole 8 x 8 blocks
    alignas(32) float wt[kLaneChunkCols][JW];               // the chunk transposed, rows past `valid` zero
    alignas(32) float sums[kHalves][J + 1][kHalfRows];      // each half tile's sums between chunks (squares last)
    alignas(32) float columns[kLaneChunkCols][kHalfRows];  // a half tile's chunk transposed
    if (k == 0) std::memset(sums, 0, sizeof(sums));        // (empty sums: zero, as the reference's)
    for (int64_t col0 = 0; col0 < k; col0 += kLaneChunkCols) {
        const int64_t width = std::min(k - col0, kLaneChunkCols);
        transpose_chunk<JW>(w, k, valid, col0, width, wt);
        request_rows(w, static_cast<int>(valid), k, col0 + width, std::min(k, col0 + width + kLaneChunkCols));
        for (int h = 0; h < 2 * tiles; ++h) {
            transpose_rows(x + h * kHalfRows * k, k, col0, width, columns);
            group_over_chunk<JW, G, kSquares>(columns, wt, 0, width, col0 == 0, sums[h], sums[h][J]);
            if constexpr (J > G) group_over_chunk<JW, G, false>(columns, wt, G, width, col0 == 0, sums[h] + G, nullptr);
        }
    }
    for (int h = 0; h < 2 * tiles; ++h) {
        for (int r = 0; r < kHalfRows; ++r)
            for (int64_t j = 0; j < valid; ++j) out[(kHalfRows * h + r) * ldo + j] = sums[h][j][r];
        if constexpr (kSquares) std::memcpy(squares + kHalfRows * h, sums[h][J], sizeof(float) * kHalfRows);
    }
}

// `tiles` tiles of 16 rows of x against all `rows` weight rows of w (row stride k), kLaneTiles tiles at a time
// against kLaneSums weight rows (then 8, 12 or 16 of them); squares: each row's sum of squares too, where not null.
template <class X>
void tiles_in_lanes(const X* x, int64_t tiles, int64_t k, const float* w, int64_t rows, float* out, int64_t ldo,
                    float* squares) {
    for (int64_t i = 0; i < tiles; i += kLaneTiles) {
        const int count = static_cast<int>(std::min<int64_t>(tiles - i, kLaneTiles));
        const X* xi = x + i * kF32LaneRows * k;
        int64_t j = 0;
        do {  // (once with no weight rows where the squares are wanted: the squares alone)
            const int64_t valid = std::min<int64_t>(rows - j, kLaneSums);
            const float* wj = w + j * k;
            float* o = out + i * kF32LaneRows * ldo + j;
            float* sq = j == 0 && squares ? squares + i * kF32LaneRows : nullptr;  // (with the first weight rows)
            if (sq) {
                if (valid <= 8) rows_in_lanes<8, true>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 12) rows_in_lanes<12, true>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 16) rows_in_lanes<16, true>(xi, k, count, wj, valid, o, ldo, sq);
                else rows_in_lanes<kLaneSums, true>(xi, k, count, wj, valid, o, ldo, sq);
            } else if (valid > 0) {
                if (valid <= 8) rows_in_lanes<8, false>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 12) rows_in_lanes<12, false>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 16) rows_in_lanes<16, false>(xi, k, count, wj, valid, o, ldo, sq);
                else rows_in_lanes<kLaneSums, false>(xi, k, count, wj, valid, o, ldo, sq);
            }
            j += kLaneSums;
        } while (j < rows);
    }
}

}  // namespace

void gemm_f32(const DenseGemmTask& t) {
    auto* out = static_cast<float*>(t.out);
    const auto* w = static_cast<const float*>(t.w);
    const auto* x = static_cast<const float*>(t.x);
    // whole tiles of 16 activation rows in the lanes, the rows left 4 at a time against 8 weight rows in the lanes
    const int64_t tiled = t.n / kF32LaneRows * kF32LaneRows;
    if (t.rows > 0) tiles_in_lanes(x, tiled / kF32LaneRows, t.k, w, t.rows, out, t.ldo, nullptr);
    for (int64_t j = 0; j < t.rows; j += 8) {
        const int64_t valid = std::min<int64_t>(t.rows - j, 8);
        for (int64_t i = tiled; i < t.n; i += 4) {
            const int64_t ra = std::min<int64_t>(t.n - i, 4);
            __m256 acc[4];
            f32_ordered_rows(w + j * t.k, t.k, valid, x + i * t.k, ra, 0, acc);
            for (int64_t a = 0; a < ra; ++a) {
                alignas(32) float lanes[8];
                _mm256_store_ps(lanes, acc[a]);
                std::copy(lanes, lanes + valid, out + (i + a) * t.ldo + j);
            }
        }
    }
}

void gemm_f32_squares_tiles(const bf16* x, int64_t tiles, int64_t k, const float* fn, int64_t fn_rows, float* out,
                            int64_t ldo, float* squares) {
    tiles_in_lanes(x, tiles, k, fn, fn_rows, out, ldo, squares);
}

// Rows of x in tiles of up to 4 against weight rows in groups of 8 lanes, read from the bf16 stream as they are
// (f32_squares_rows.h).
void gemm_f32_squares_rows(const bf16* x, int64_t n, int64_t k, const float* fn, int64_t fn_rows, float* out,
                           int64_t ldo, float* squares) {
    auto tile = [k](const float* w, int64_t valid, const bf16* xi, int64_t ra, int own, float (&lanes)[4][8]) {
        __m256 acc[4];
        f32_ordered_rows(w, k, valid, xi, ra, own, acc);
        for (int64_t a = 0; a < ra; ++a) _mm256_store_ps(lanes[a], acc[a]);
    };
    f32_squares_rows<8, 4>(x, n, k, fn, fn_rows, out, ldo, squares, tile);
}

}  // namespace deepinfer::backend::cpu::avx2
