// AVX2 dense GEMMs: bf16 x bf16 -> bf16 and fp32 x bf16 -> fp32 with fp32 FMAs (fp32 weights: gemm_f32_avx2.cpp).
// Every output is one dot product with k in the lanes (8 partial sums, a fixed horizontal sum, then the k % 8 tail in order), computed the same way for
// any number of activation rows: a row's result does not depend on the batch it is in (row invariance,
// tests/ops/row_invariance_test.cpp). Few rows (decode) stream each weight row once; many rows walk the weight
// in 16-row blocks, each converted to fp32 and kept in L2 while every activation row of a 64-row chunk passes
// over it.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/block_prefetch.h"
#include "backend/cpu/x86/isa_ops.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

constexpr int64_t kBlockedMinRows = kDenseBlockedMinRows;  // activation rows from which weights are walked in blocks
constexpr int64_t kBlockRows = 16;
constexpr int kTileActs = 3;  // activation rows of a blocked path's tile (the streamed path's 2, or 3 at an odd end)
constexpr int64_t kConvertedActRows = 64;  // activation rows the blocked path holds as fp32 at a time

struct Bf16 {
    using T = uint16_t;
    static __m256 load8(const T* p) { return load_bf16(p); }
    static float one(const T* p) {
        const uint32_t bits = static_cast<uint32_t>(*p) << 16;
        float f;
        __builtin_memcpy(&f, &bits, 4);
        return f;
    }
};
// count bf16 values -> fp32 (exact).
inline void to_f32(const uint16_t* src, int64_t count, float* dst) {
    int64_t c = 0;
    for (; c + 8 <= count; c += 8) _mm256_storeu_ps(dst + c, load_bf16(src + c));
    for (; c < count; ++c) dst[c] = Bf16::one(src + c);
}

struct F32 {
    using T = float;
    static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
    static float one(const T* p) { return *p; }
};

// ---- GEMV: k in the lanes, 4 weight rows x up to 2 activation rows per pass --------------------------
// The 4 rows of a pass come from the 4 quarters of the task's rows: rows read side by side from adjacent
// addresses measured ~30% below the read bandwidth, rows >= 4 rows apart within 5-10%.


// Few activation rows (the streamed path) request each weight row's lines this far ahead into L2, from 2
// activation rows on. In-process A/B (bench-ops with a temporary variant switch, 2 runs), head: n = 2 36.6 ->
// 29.4 ms and 44.8 -> 41.9 ms, n = 4 56.1 -> 47.7 ms and 51.5 -> 41.1 ms (8 KB; 4 KB gained a little less);
// n = 1 unchanged (Zen 3). From one row where the activations are fp32 (the head and the compressor's fp32
// linears, as on AVX-512): on Zen 4 (`bench-ops --isa avx2 --rows 1 --only bf16 --per-call 12`, the two
// alternating call by call, two rounds) the head at one row 0.965-0.968x the time with two threads, 0.81x with
// one; a bf16 row (`gemm_bf16`) took 0.97-1.08x, so it streams without.
constexpr int64_t kStreamAheadBytes = 8192;
// ... and each line also this far ahead into L1, as the AVX-512 kernels' kNearAheadBytes: the L2 request has
// brought it near by then, so the L1 one waits on L2, not memory. In-process A/B on Zen 4 (`bench-ops --isa avx2
// [--threads 1] --rows 1 2 4 --only bf16 --per-call 8-16`, with it / without, by the 25th percentiles): the head at
// 1-2 rows 0.96-0.98x the time with two threads and 0.80-0.92x with one (at 4 rows 0.89 / 1.00), `gemm_bf16` at 2-4
// rows 0.93-0.94x / 0.79-0.91x; 512 bytes gained less (head 0.93-0.97x), 2-3 KB no more (0.95-1.02x).
constexpr int64_t kNearAheadBytes = 1024;
// A streamed weight row's line at `at`: its requests at both distances.
inline void request_line_ahead(const void* at) {
    _mm_prefetch(static_cast<const char*>(at) + kStreamAheadBytes, _MM_HINT_T1);
    _mm_prefetch(static_cast<const char*>(at) + kNearAheadBytes, _MM_HINT_T0);
}
template <class X>
inline constexpr int kStreamAheadMinRows = sizeof(typename X::T) == 4 ? 1 : 2;

// x: RA activation rows ldx apart (ldx >= k)
template <class X, class W, int RW, int RA, int C>
void gemv_tile(const typename X::T* x, int64_t k, int64_t ldx, const typename W::T* const* w, float (&res)[4][C],
               BlockPrefetch* pf) {
    __m256 acc[RW][RA];
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm256_setzero_ps();
    // the prefetch state in registers for the loop: stepped through *pf, its countdown's store and reload made a
    // chain through memory across column steps (in process on Zen 3: 0.93-1.00 of the blocked path's time)
    BlockPrefetch local = pf ? *pf : BlockPrefetch{};
    const auto step = [&](int64_t col) __attribute__((always_inline)) {
        __m256 xv[RA];
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) xv[a] = X::load8(x + a * ldx + col);
#pragma GCC unroll 16
        for (int r = 0; r < RW; ++r) {
            const __m256 wv = W::load8(w[r] + col);
#pragma GCC unroll 16
            for (int a = 0; a < RA; ++a) acc[r][a] = _mm256_fmadd_ps(wv, xv[a], acc[r][a]);
        }
    };
    // Spans of 8 column steps as straight-line code, a span's prefetches issued at its start. Why: with the
    // prefetch test at the head of a one-step loop, GCC aligned that loop as a jump target only, and its speed
    // followed where it landed: the blocked path's 4 x 3 tile took 0.82-1.18x the time with the function's
    // code shifted by 16, 32 or 48 bytes (in process on Zen 3, 45 rounds); as spans, 0.97-1.02x, and 0.76-0.84 of
    // the one-step loop's time where that one landed badly (same instructions per step, same bits).
    int64_t col = 0;
    for (; col + 64 <= k; col += 64) {
        if (pf) {
            local.steps(8);
        } else if (RA >= kStreamAheadMinRows<X>) {
            // streamed rows: each row's lines kStreamAheadBytes ahead into L2 and kNearAheadBytes into L1, one per
            // 32 columns
#pragma GCC unroll 4
            for (int r = 0; r < RW; ++r)
#pragma GCC unroll 2
                for (int h = 0; h < 2; ++h) request_line_ahead(w[r] + col + 32 * h);
        }
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) step(col + 8 * s);
    }
    for (; col + 8 <= k; col += 8) {
        if (pf) {
            local.step();
        } else if (RA >= kStreamAheadMinRows<X> && col % 32 == 0) {
#pragma GCC unroll 4
            for (int r = 0; r < RW; ++r) request_line_ahead(w[r] + col);
        }
        step(col);
    }
    if (pf) *pf = local;
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) {
            float s = hsum(acc[r][a]);
            for (int64_t c = col; c < k; ++c) s += X::one(x + a * ldx + c) * W::one(w[r] + c);
            res[r][a] = s;
        }
}

// Weight rows [j0, j1) against every activation row, 4 rows per pass taken from the 4 quarters of the range.
// (Not inlined: inlined into gemm_any, its tiles ran n = 4 ~7% slower in cache.)
template <class X, class W, class Store>
[[gnu::noinline]] void gemv_range(const DenseGemmTask& t, int64_t j0, int64_t j1, const Store& store,
                                  BlockPrefetch* pf = nullptr) {
    const auto* x = static_cast<const typename X::T*>(t.x);
    const auto* w = static_cast<const typename W::T*>(t.w);
    const int64_t quarter = (j1 - j0) / 4;
    auto pass = [&](int rw, const int64_t(&rows)[4]) {
        const typename W::T* wr[4];
        for (int r = 0; r < rw; ++r) wr[r] = w + rows[r] * t.k;
        for (int64_t i = 0; i < t.n;) {
            float res[4][3] = {};
            // two rows a tile, the last three of an odd count in one (a tile of one row re-reads and re-converts
            // the pass's weights for a third of the products)
            const int ra = t.n - i == 3 ? 3 : t.n - i >= 2 ? 2 : 1;
            const auto* xi = x + i * t.k;
            if (rw == 4) {
                if (ra == 3) gemv_tile<X, W, 4, 3>(xi, t.k, t.k, wr, res, pf);
                else if (ra == 2) gemv_tile<X, W, 4, 2>(xi, t.k, t.k, wr, res, pf);
                else gemv_tile<X, W, 4, 1>(xi, t.k, t.k, wr, res, pf);
            } else {
                if (ra == 3) gemv_tile<X, W, 1, 3>(xi, t.k, t.k, wr, res, pf);
                else if (ra == 2) gemv_tile<X, W, 1, 2>(xi, t.k, t.k, wr, res, pf);
                else gemv_tile<X, W, 1, 1>(xi, t.k, t.k, wr, res, pf);
            }
            for (int r = 0; r < rw; ++r)
                for (int a = 0; a < ra; ++a) store(i + a, rows[r], res[r][a]);
            i += ra;
        }
    };
    for (int64_t j = j0; j < j0 + quarter; ++j) pass(4, {j, j + quarter, j + 2 * quarter, j + 3 * quarter});
    for (int64_t j = j0 + 4 * quarter; j < j1; ++j) pass(1, {j, j, j, j});
}

// Many rows: each block of kBlockRows weight rows is converted once to fp32 (in t.scratch, L2), then every
// activation row passes over it in tiles of 3 activation rows x 4 weight rows (12 accumulators), each weight
// vector loaded once for the tile's 3 rows; activation rows come as fp32 too (bf16 converted, fp32 copied), 64 at
// a time. Converting in the tiles instead (the streamed path's way: two ops per 8 values, one of them on the FMA
// ports) held these GEMMs near half the FMA peak. Each output's sum keeps its order (8 lanes over k, the same
// horizontal sum and tail), so the results are the streamed path's bit for bit.
//
// Rows in scratch lie ld = k + kDenseAvx2RowPad floats apart: at a k that is a multiple of 1024 (every released
// dense k) rows k floats apart start in the same L1 set, so a tile's 7 row streams and their prefetched lines
// competed for one set's 8 ways. In process on Zen 3 (one thread, 256 x 2048 / 5120 and 512 x 1024, n = 16-128,
// the two builds alternating), padding the panel's rows took 0.95-0.98 of the time, padding the activation rows
// too 0.82-0.97.
template <class Store>
void panel_block(const DenseGemmTask& t, const float* panel, const float* x, int64_t ld, int64_t j0, int64_t rows,
                 const Store& store, BlockPrefetch* pf) {
    for (int64_t i = 0; i < t.n; i += kTileActs) {
        const int64_t ra = t.n - i < kTileActs ? t.n - i : kTileActs;
        for (int64_t r0 = 0; r0 < rows;) {
            const int rw = rows - r0 >= 4 ? 4 : 1;
            const float* wr[4];
            for (int r = 0; r < 4; ++r) wr[r] = panel + (r0 + (r < rw ? r : 0)) * ld;
            float res[4][kTileActs] = {};
            const float* xi = x + i * ld;
            if (rw == 4) {
                if (ra == 3) gemv_tile<F32, F32, 4, 3>(xi, t.k, ld, wr, res, pf);
                else if (ra == 2) gemv_tile<F32, F32, 4, 2>(xi, t.k, ld, wr, res, pf);
                else gemv_tile<F32, F32, 4, 1>(xi, t.k, ld, wr, res, pf);
            } else {
                if (ra == 3) gemv_tile<F32, F32, 1, 3>(xi, t.k, ld, wr, res, pf);
                else if (ra == 2) gemv_tile<F32, F32, 1, 2>(xi, t.k, ld, wr, res, pf);
                else gemv_tile<F32, F32, 1, 1>(xi, t.k, ld, wr, res, pf);
            }
            for (int r = 0; r < rw; ++r)
                for (int64_t a = 0; a < ra; ++a) store(i + a, j0 + r0 + r, res[r][a]);
            r0 += rw;
        }
    }
}

// The blocked path for t.n <= kConvertedActRows activation rows that lie ld floats apart at x.
template <class Store>
void blocked_rows(const DenseGemmTask& t, const float* x, int64_t ld, const Store& store) {
    const auto* w = static_cast<const uint16_t*>(t.w);
    const int64_t row_bytes = t.k * 2;
    // column steps of one block: activation tiles x passes (4 rows each, then single rows)
    const int64_t steps =
        (kBlockRows / 4 + kBlockRows % 4) * ((t.n + kTileActs - 1) / kTileActs) * (t.k / 8 > 0 ? t.k / 8 : 1);
    for (int64_t j = 0; j < t.rows; j += kBlockRows) {
        const int64_t j1 = j + kBlockRows < t.rows ? j + kBlockRows : t.rows;
        const int64_t j2 = j1 + kBlockRows < t.rows ? j1 + kBlockRows : t.rows;
        for (int64_t r = j; r < j1; ++r) to_f32(w + r * t.k, t.k, t.scratch + (r - j) * ld);
        // the next block's rows into L2 while this block computes (its conversion would wait on memory)
        BlockPrefetch pf = next_block(t.w, row_bytes, j1, j2, steps);
        panel_block(t, t.scratch, x, ld, j, j1 - j, store, &pf);
    }
}

// Activation rows from which gemm_any takes the blocked path: kBlockedMinRows, and fewer where ymm ops issue as two
// halves (Zen 1), whose streamed tiles convert the weights again for every two activation rows (and bf16 activations
// again for every four weight rows). One thread there, blocked against streamed: gemm_bf16 (wo_a's shape) at 4 / 6 /
// 8 rows 0.79x / 0.68x / 0.67x the time, at 2-3 rows 1.33x / 0.98x; the head (fp32 activations) at 8 rows 0.88-0.99x,
// 10-14 rows 0.81-0.87x, 3-6 rows 0.90-1.77x (docs/PERFORMANCE.md "Fifty-first session").
template <class X>
int64_t blocked_min_rows() {
    static_assert(kDenseBlockedFewestRows <= 4, "dense_scratch_floats must cover the blocked path's rows");
    if (!ymm_half_rate()) return kBlockedMinRows;
    return sizeof(typename X::T) == 2 ? 4 : 8;
}

template <class X, class Store>
void gemm_any(const DenseGemmTask& t, const Store& store) {
    if (t.n < blocked_min_rows<X>()) {
        gemv_range<X, Bf16>(t, 0, t.rows, store);
        return;
    }
    // activation rows kConvertedActRows at a time as fp32, ld apart (converting bf16 rows per tile and block
    // instead cost 10-20%); the task's weight rows are read again for each such chunk
    const int64_t ld = t.k + kDenseAvx2RowPad;
    float* x32 = t.scratch + kBlockRows * ld;
    for (int64_t i0 = 0; i0 < t.n; i0 += kConvertedActRows) {
        DenseGemmTask chunk = t;
        chunk.n = t.n - i0 < kConvertedActRows ? t.n - i0 : kConvertedActRows;
        for (int64_t i = 0; i < chunk.n; ++i) {
            const auto* src = static_cast<const typename X::T*>(t.x) + (i0 + i) * t.k;
            if constexpr (sizeof(typename X::T) == 2) to_f32(src, t.k, x32 + i * ld);
            else __builtin_memcpy(x32 + i * ld, src, static_cast<size_t>(t.k) * sizeof(float));
        }
        blocked_rows(chunk, x32, ld, [&](int64_t i, int64_t j, float v) { store(i0 + i, j, v); });
    }
}

inline uint16_t float_to_bf16_bits(float v) {
    return static_cast<uint16_t>(_mm_extract_epi16(to_bf16(_mm256_set1_ps(v)), 0));
}

}  // namespace

void gemm_bf16(const DenseGemmTask& t) {
    auto* out = static_cast<uint16_t*>(t.out);
    gemm_any<Bf16>(t, [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = float_to_bf16_bits(v); });
}

void gemm_f32_bf16w(const DenseGemmTask& t) {
    auto* out = static_cast<float*>(t.out);
    gemm_any<F32>(t, [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = v; });
}

}  // namespace deepinfer::backend::cpu::avx2
