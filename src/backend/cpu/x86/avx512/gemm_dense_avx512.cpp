// AVX-512 dense GEMMs: bf16 x bf16 -> bf16 (vdpbf16ps: products exact, fp32 sums), fp32 x bf16 -> fp32
// (FMA), and fp32 x fp32 -> fp32 in the reference's exact order (see gemm_f32). In the first two every
// output is one dot product with k in the lanes (16 partial sums, then a fixed horizontal sum), computed
// the same way for any number of activation rows: a row's result does not depend on the batch it is in
// (row invariance, tests/ops/row_invariance_test.cpp), which the engine's batched / chunked / speculative
// equalities rest on. Few rows (decode) stream each weight row once; many
// rows walk the weight in 16-row blocks that stay in L2 while every activation row passes over them, and from
// Step::kChunkedMinRows rows on also k in chunks packed into L1 (see "many activation rows").
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/block_prefetch.h"
#include "backend/cpu/x86/f32_squares_rows.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// From this many activation rows on, the weight is walked in L2-resident blocks of kBlockRows rows.
constexpr int64_t kBlockedMinRows = kDenseBlockedMinRows;
constexpr int64_t kBlockRows = 16;

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

// ---- GEMV: k in the lanes, 4 weight rows x up to 4 activation rows per pass ---------------------------
// The 4 rows of a pass come from the 4 quarters of the task's rows: rows read side by side from adjacent
// addresses (k * 2 bytes apart) measured ~30% below the read bandwidth, rows >= 4 rows apart within 5-10%.

// bf16 x and weights, 32 columns per step.
struct Bf16Step {
    static constexpr int kCols = 32;
    using X = __m512i;
    static constexpr int64_t kChunkedMinRows = 16;  // see "many activation rows"
    static constexpr int kStreamAheadMinRows = 2;   // see kStreamAheadBytes
    static __m512i load_x(const void* x, int64_t col, int64_t k) {
        return _mm512_maskz_loadu_epi16(mask(col, k), static_cast<const uint16_t*>(x) + col);
    }
    // all kCols columns from col (the _full forms) or those below k; w_at: the weight row at column col
    static __m512i load_x_full(const void* x, int64_t col) {
        return _mm512_loadu_si512(static_cast<const uint16_t*>(x) + col);
    }
    static __m512 madd_full(__m512 acc, const uint16_t* w_at, __m512i x) {
        return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(w_at), (__m512bh)x);
    }
    static __m512 madd_at(__m512 acc, const uint16_t* w_at, __m512i x, int64_t col, int64_t k) {
        const __m512i wv = _mm512_maskz_loadu_epi16(mask(col, k), w_at);
        return _mm512_dpbf16_ps(acc, (__m512bh)wv, (__m512bh)x);
    }
    static __mmask32 mask(int64_t col, int64_t k) {
        const int64_t left = k - col;
        return left >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << left) - 1u);
    }
};
// fp32 x against bf16 weights, 32 columns per step. One 64-byte load of a weight row holds 16 pairs of columns
// (2c, 2c + 1): shifted left by 16 the even columns are fp32, masked to the high halves the odd ones. Each lane adds
// its even product, then its odd one, against x split into its even and odd columns (F32Step splits x as it loads
// it, F32SplitStep reads x split beforehand: the same products in the same order, so the same bits either way).
// Widening 16 columns at a time (a vpmovzxwd load and a shift per FMA, x masked on every step) held one core to ~22
// GB/s on the head; which split runs: kF32PairsMinRows (isa_ops.h).
struct F32Step {
    static constexpr int kCols = 32;
    // fp32 activations make a tile's chunk 8 KB; below 64 rows the chunked path measured 2-15% slower in cache
    // (Zen 5: n = 16 152-158 against 174-179 GFLOP/s, n = 48 even) and the streamed head at n = 16 slower still
    static constexpr int64_t kChunkedMinRows = 64;
    static constexpr int kStreamAheadMinRows = 1;  // see kStreamAheadBytes
    struct X {
        __m512 even, odd;  // x[col + 2 c], x[col + 2 c + 1]
    };
    // a: columns col..col+15, b: col+16..col+31
    static X split(__m512 a, __m512 b) {
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
        return {_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b)};
    }
    static X load_x(const void* x, int64_t col, int64_t k) {
        const auto* p = static_cast<const float*>(x) + col;
        const int64_t left = k - col;
        const __m512 a = _mm512_maskz_loadu_ps(lane_mask(left < 16 ? left : 16), p);
        return split(a, left > 16 ? _mm512_maskz_loadu_ps(lane_mask(left - 16), p + 16) : _mm512_setzero_ps());
    }
    static X load_x_full(const void* x, int64_t col) {
        const auto* p = static_cast<const float*>(x) + col;
        return split(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16));
    }
    static __m512 madd(__m512 acc, __m512i pairs, const X& x) {
        const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
        const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
        const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, high));
        return _mm512_fmadd_ps(odd, x.odd, _mm512_fmadd_ps(even, x.even, acc));
    }
    static __m512 madd_full(__m512 acc, const uint16_t* w_at, const X& x) {
        return madd(acc, _mm512_loadu_si512(w_at), x);
    }
    static __m512 madd_at(__m512 acc, const uint16_t* w_at, const X& x, int64_t col, int64_t k) {
        return madd(acc, _mm512_maskz_loadu_epi16(Bf16Step::mask(col, k), w_at), x);
    }
};
// x split beforehand (f32_pair_rows, the pairs form of isa_ops.h): every step loads x whole.
struct F32SplitStep : F32Step {
    static X load_x(const void* x, int64_t col, int64_t) { return load_x_full(x, col); }
    static X load_x_full(const void* x, int64_t col) {
        const auto* p = static_cast<const float*>(x) + col;
        return {_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16)};
    }
};

// Few activation rows (the streamed path) request each weight row's lines this far ahead into L2, from 2
// activation rows on (both weight formats are 2 bytes per column). In-process A/B (bench-ops with a temporary
// variant switch, 2 runs at ~33 GB/s): head n = 4 45.5-45.9 -> 41.1-41.7 ms, bf16 8192x4096 n = 4 2.21-2.23 ->
// 2.13-2.15 ms (4 KB ahead); at n = 1 it cost 1-2.5%, so a single row streams without it. 4, 8 and 16 KB did alike;
// into L1 (1-4 KB) instead of L2 it was 2-15% slower at every n (beside it: kNearAheadBytes). (8 KB, as the AVX2
// kernels use, measured the same as 4 KB.) From which row count on: Step::kStreamAheadMinRows. A single row of the
// fp32 head (F32Step) streams with it: one thread on Zen 4 (`bench-ops --threads 1 --rows 1 --only head --per-call
// 5`, three alternating rounds) 64.3-65.4 -> 58.7-59.7 ms, two threads at ~35 GB/s the same within the drift; a
// single bf16 row (gemm_bf16, one thread at the core's read rate already) 2.08-2.15 -> 2.50-2.58 ms with it, so it
// streams without.
constexpr int64_t kStreamAheadBytes = 8192;
// ... and each line also this far ahead into L1 (with the 8 KB into L2 only). One thread, each pair alternated call by
// call in one process (bench-ops --per-call with a temporary switch): the fp32 head n = 1 0.93-0.95x the time, bf16 at
// n = 2-4 0.87-0.91x; a bf16 row at n = 1 (no L2 request) 1.14-1.27x with it, so that row streams without either.
// Both steps are 32 columns, one 64-byte line of each weight row: every step requests one line per row.
constexpr int64_t kNearAheadBytes = 512;
static_assert(Bf16Step::kCols == 32 && F32Step::kCols == 32, "one line of each weight row a step");

// One column step from col of RW weight rows (w_at(r): row r at column col) against RA activation rows (x_stride
// bytes apart), the columns past k masked off: the GEMV's steps and the chunked path's tail.
template <class Step, int RW, int RA, class WAt>
inline void masked_step(__m512 (&acc)[RW][RA], const uint8_t* x, int64_t x_stride, int64_t col, int64_t k,
                        const WAt& w_at) {
    typename Step::X xv[RA];
#pragma GCC unroll 16
    for (int a = 0; a < RA; ++a) xv[a] = Step::load_x(x + a * x_stride, col, k);
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = Step::madd_at(acc[r][a], w_at(r), xv[a], col, k);
}

// One step of all kCols columns from col (the same products as masked_step's, without the masks).
template <class Step, int RW, int RA, class WAt>
inline void full_step(__m512 (&acc)[RW][RA], const uint8_t* x, int64_t x_stride, int64_t col, const WAt& w_at) {
    typename Step::X xv[RA];
#pragma GCC unroll 16
    for (int a = 0; a < RA; ++a) xv[a] = Step::load_x_full(x + a * x_stride, col);
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = Step::madd_full(acc[r][a], w_at(r), xv[a]);
}

// RW weight rows (pointers) against RA activation rows (x_stride bytes apart): res[r][a].
template <class Step, int RW, int RA>
inline void gemv_tile(const void* const* w, const uint8_t* x, int64_t x_stride, int64_t k, float (&res)[4][4],
                      BlockPrefetch* pf) {
    __m512 acc[RW][RA];
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_setzero_ps();
    for (int64_t col = 0; col < k; col += Step::kCols) {
        if (pf) {
            pf->step();
        } else if (RA >= Step::kStreamAheadMinRows) {
            // streamed rows: each row's line kStreamAheadBytes ahead into L2, and kNearAheadBytes ahead into L1
#pragma GCC unroll 4
            for (int r = 0; r < RW; ++r) {
                const char* at = static_cast<const char*>(w[r]) + col * 2;
                _mm_prefetch(at + kStreamAheadBytes, _MM_HINT_T1);
                _mm_prefetch(at + kNearAheadBytes, _MM_HINT_T0);
            }
        }
        auto w_at = [&](int r) { return static_cast<const uint16_t*>(w[r]) + col; };
        if (col + Step::kCols <= k) full_step<Step>(acc, x, x_stride, col, w_at);
        else masked_step<Step>(acc, x, x_stride, col, k, w_at);
    }
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) res[r][a] = hsum(acc[r][a]);
}

template <class Step, int RW>
inline void gemv_rows(const void* const* w, const uint8_t* x, int64_t x_stride, int64_t k, int64_t ra,
                      float (&res)[4][4], BlockPrefetch* pf) {
    switch (ra) {
        case 4: gemv_tile<Step, RW, 4>(w, x, x_stride, k, res, pf); break;
        case 3: gemv_tile<Step, RW, 3>(w, x, x_stride, k, res, pf); break;
        case 2: gemv_tile<Step, RW, 2>(w, x, x_stride, k, res, pf); break;
        default: gemv_tile<Step, RW, 1>(w, x, x_stride, k, res, pf); break;
    }
}

// The activation rows of the streamed path's next tile, `left` rows to go: 4, but 5 rows go as 3 + 2 (so 5, 9, 13
// rows do not end in a tile of one). A tile of one row has only its 4 weight rows' sums to chain, and 4 chains of
// vdpbf16ps (latency ~6 cycles on Zen 4) leave the unit idle; 3 + 2 reads and converts the weights as often as 4 + 1.
// Zen 4, one thread, `gemm_bf16` on wo_a's shape at 5 rows (`bench-ops --threads 1 --rows 5 --only bf16 --per-call
// 5`, both builds with the tile out of line so that its code is the same): 3950-4009 -> 2934-3176 us; the head (fp32
// FMAs) unchanged. Every output keeps its own chain, so the bits do not depend on the tiling.
inline int64_t stream_tile_rows(int64_t left) { return left == 5 ? 3 : left >= 4 ? 4 : left; }

// Weight rows [j0, j1) against every activation row, 4 rows per pass taken from the 4 quarters of the range.
template <class Step, class Store>
void gemv_range(const DenseGemmTask& t, int64_t j0, int64_t j1, int64_t w_elem_bytes, int64_t x_stride,
                const Store& store, BlockPrefetch* pf = nullptr) {
    const auto* w = static_cast<const uint8_t*>(t.w);
    const auto* x = static_cast<const uint8_t*>(t.x);
    const int64_t row_bytes = t.k * w_elem_bytes;
    const int64_t quarter = (j1 - j0) / 4;
    auto pass = [&](int rw, const int64_t(&rows)[4]) {
        const void* wr[4];
        for (int r = 0; r < rw; ++r) wr[r] = w + rows[r] * row_bytes;
        for (int64_t i = 0, ra = 0; i < t.n; i += ra) {
            float res[4][4];
            ra = stream_tile_rows(t.n - i);
            if (rw == 4) gemv_rows<Step, 4>(wr, x + i * x_stride, x_stride, t.k, ra, res, pf);
            else gemv_rows<Step, 1>(wr, x + i * x_stride, x_stride, t.k, ra, res, pf);
            for (int r = 0; r < rw; ++r)
                for (int64_t a = 0; a < ra; ++a) store(i + a, rows[r], res[r][a]);
        }
    };
    for (int64_t j = j0; j < j0 + quarter; ++j) pass(4, {j, j + quarter, j + 2 * quarter, j + 3 * quarter});
    for (int64_t j = j0 + 4 * quarter; j < j1; ++j) pass(1, {j, j, j, j});
}

// ---- many activation rows: blocks of weight rows, chunks of k, lane sums kept in memory between chunks ----
// Over all of k a 4 x 4 tile cannot keep its operands in L1 (4 weight rows are 32 KB at k = 4096, and the
// activation rows streaming past evict them), so both come from L2: 512 bytes per 16 dot products, about
// what L2 delivers, and the kernel ran at 42-58% of the bf16-dot peak (Zen 5). Here k is cut in chunks of
// kChunkCols: a block's chunk is copied to the scratch (its rows k * 2 bytes apart would share L1 sets:
// 16 rows 8 KB apart overfill a 12-way set), stays in L1 while every 4-row tile of up to kGroupRows
// activation rows passes over it, and a tile's chunk stays in L1 across the block's passes. Each lane's
// partial sum is stored after a chunk and loaded before the next, so every output is the same chain of dot
// products in k order, then the same horizontal sum, as the single-pass GEMV above: the same bits for any n
// (row invariance). (Chunks of 256 and 1024 columns measured 3-10% slower; chunks over the unpacked rows
// 5-20% slower, even at 16 rows.)
constexpr int64_t kChunkCols = 512;
constexpr int64_t kGroupRows = 128;
// Scratch: the packed chunk [kBlockRows][kChunkCols] bf16, then per 4-row tile of the group its lane sums
// [kBlockRows][4][16] floats (a tile's 4 KB adjacent: no set conflicts between its lines).
constexpr int64_t kPackedFloats = kBlockRows * kChunkCols / 2;
constexpr int64_t kTileSumFloats = kBlockRows * 4 * 16;
static_assert(kPackedFloats + kGroupRows / 4 * kTileSumFloats <= kDenseBlockedScratchFloats, "dense scratch too small");

// RW packed weight rows (wp, kChunkCols apart) against RA activation rows over columns [c0, c1): lane sums from /
// to sums ([RW][4][16] floats), or, on the last chunk, the finished dot products stored.
template <class Step, int RW, int RA, class Store>
inline void tile_chunk(const uint16_t* wp, const uint8_t* x, int64_t x_stride, int64_t c0, int64_t c1, int64_t k,
                       float* sums, BlockPrefetch* pf, const Store& store) {
    __m512 acc[RW][RA];
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a)
            acc[r][a] = c0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(sums + (r * 4 + a) * 16);
    pf->steps((c1 - c0 + Step::kCols - 1) / Step::kCols);
    int64_t col = c0;
    for (; col + Step::kCols <= c1; col += Step::kCols)
        full_step<Step>(acc, x, x_stride, col, [&](int r) { return wp + r * kChunkCols + (col - c0); });
    if (col < c1)  // k's tail (the last chunk only)
        masked_step<Step>(acc, x, x_stride, col, k, [&](int r) { return wp + r * kChunkCols + (col - c0); });
    if (c1 < k) {
#pragma GCC unroll 16
        for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
            for (int a = 0; a < RA; ++a) _mm512_store_ps(sums + (r * 4 + a) * 16, acc[r][a]);
        return;
    }
#pragma GCC unroll 16
    for (int r = 0; r < RW; ++r)
#pragma GCC unroll 16
        for (int a = 0; a < RA; ++a) store(r, a, hsum(acc[r][a]));
}

template <class Step, int RW, class Store>
inline void tile_chunk_rows(const uint16_t* wp, const uint8_t* x, int64_t x_stride, int64_t c0, int64_t c1,
                            int64_t k, int64_t ra, float* sums, BlockPrefetch* pf, const Store& store) {
    switch (ra) {
        case 4: tile_chunk<Step, RW, 4>(wp, x, x_stride, c0, c1, k, sums, pf, store); break;
        case 3: tile_chunk<Step, RW, 3>(wp, x, x_stride, c0, c1, k, sums, pf, store); break;
        case 2: tile_chunk<Step, RW, 2>(wp, x, x_stride, c0, c1, k, sums, pf, store); break;
        default: tile_chunk<Step, RW, 1>(wp, x, x_stride, c0, c1, k, sums, pf, store); break;
    }
}

// Weight rows [j0, j1) (at most kBlockRows, bf16) against activation rows [i0, i1) (at most kGroupRows).
template <class Step, class Store>
void block_group(const DenseGemmTask& t, int64_t j0, int64_t j1, int64_t i0, int64_t i1, int64_t x_stride,
                 BlockPrefetch* pf, const Store& store) {
    const auto* w = static_cast<const uint16_t*>(t.w);
    const auto* x = static_cast<const uint8_t*>(t.x);
    const int64_t fours = (j1 - j0) / 4 * 4;
    auto* packed = reinterpret_cast<uint16_t*>(t.scratch);
    float* tile_sums = t.scratch + kPackedFloats;
    for (int64_t c0 = 0; c0 < t.k; c0 += kChunkCols) {
        const int64_t c1 = c0 + kChunkCols < t.k ? c0 + kChunkCols : t.k;
        for (int64_t j = j0; j < j1; ++j)
            std::memcpy(packed + (j - j0) * kChunkCols, w + j * t.k + c0, static_cast<size_t>(c1 - c0) * 2);
        for (int64_t i = i0; i < i1; i += 4) {
            const int64_t ra = i1 - i >= 4 ? 4 : i1 - i;
            const uint8_t* xi = x + i * x_stride;
            float* sums = tile_sums + (i - i0) / 4 * kTileSumFloats;
            for (int64_t j = j0; j < j1;) {
                const int rw = j < j0 + fours ? 4 : 1;
                const uint16_t* wp = packed + (j - j0) * kChunkCols;
                float* s = sums + (j - j0) * 4 * 16;
                auto put = [&](int r, int a, float v) { store(i + a, j + r, v); };
                if (rw == 4) tile_chunk_rows<Step, 4>(wp, xi, x_stride, c0, c1, t.k, ra, s, pf, put);
                else tile_chunk_rows<Step, 1>(wp, xi, x_stride, c0, c1, t.k, ra, s, pf, put);
                j += rw;
            }
        }
    }
}

template <class Step, class Store>
void gemv(const DenseGemmTask& t, int64_t w_elem_bytes, int64_t x_stride, const Store& store) {
    if (t.n < kBlockedMinRows) {
        gemv_range<Step>(t, 0, t.rows, w_elem_bytes, x_stride, store);
        return;
    }
    const int64_t row_bytes = t.k * w_elem_bytes;
    // column steps of one block: (passes of 4 rows + single rows) x activation tiles x column steps
    const int64_t steps = (kBlockRows / 4 + kBlockRows % 4) * ((t.n + 3) / 4) * ((t.k + Step::kCols - 1) / Step::kCols);
    for (int64_t j = 0; j < t.rows; j += kBlockRows) {
        const int64_t j1 = j + kBlockRows < t.rows ? j + kBlockRows : t.rows;
        const int64_t j2 = j1 + kBlockRows < t.rows ? j1 + kBlockRows : t.rows;
        // the next block's rows into L2 while this block computes (its first pass would wait on memory)
        BlockPrefetch pf = next_block(t.w, row_bytes, j1, j2, steps);
        if (t.n < Step::kChunkedMinRows) {
            gemv_range<Step>(t, j, j1, w_elem_bytes, x_stride, store, &pf);
            continue;
        }
        for (int64_t i = 0; i < t.n; i += kGroupRows)
            block_group<Step>(t, j, j1, i, i + kGroupRows < t.n ? i + kGroupRows : t.n, x_stride, &pf, store);
    }
}

}  // namespace

void gemm_bf16(const DenseGemmTask& t) {
    auto* out = static_cast<uint16_t*>(t.out);
    gemv<Bf16Step>(t, 2, t.k * 2, [&](int64_t i, int64_t j, float v) {
        out[i * t.ldo + j] = static_cast<uint16_t>(_mm256_extract_epi16(to_bf16(_mm512_set1_ps(v)), 0));
    });
}

namespace {
// fp32 x (row stride x_stride bytes, as Step reads it) against the bf16 weight, fp32 out
template <class Step>
void gemm_f32_out(const DenseGemmTask& t, int64_t x_stride) {
    auto* out = static_cast<float*>(t.out);
    gemv<Step>(t, 2, x_stride, [&](int64_t i, int64_t j, float v) { out[i * t.ldo + j] = v; });
}
}  // namespace

void gemm_f32_bf16w(const DenseGemmTask& t) { gemm_f32_out<F32Step>(t, t.k * 4); }

void gemm_f32_pairs_bf16w(const DenseGemmTask& t) { gemm_f32_out<F32SplitStep>(t, f32_pairs_stride(t.k) * 4); }

void f32_pair_rows(const float* x, int64_t k, int64_t i0, int64_t i1, float* out) {
    const int64_t stride = f32_pairs_stride(k);
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t c = 0; c < stride; c += 32) {
            const F32Step::X v = F32Step::load_x(x + i * k, c, k);
            _mm512_storeu_ps(out + i * stride + c, v.even);
            _mm512_storeu_ps(out + i * stride + c + 16, v.odd);
        }
}

// ---- fp32 weights: the reference's order exactly ----------------------------------------------------
// gemm_f32 carries the mHC mixes (spec §5.2), whose Sinkhorn output steers every residual stream; it
// computes what backend/ref computes bit for bit: k in order, a separate multiply and add per term (the
// reference is built with -ffp-contract=off). Whole tiles of 16 activation rows sit in the lanes, up to 24
// weight rows' sums in registers at once (rows_in_lanes); the rows left over (and calls of fewer rows) have
// 16 weight rows in the lanes, transposed in registers 16 columns at a time, tiles of up to 8 activation rows.
// Either way every output is the same chain of operations, so the two give the same bits. The mixes of a
// prefill come through gemm_f32_squares_tiles: the same tiles read from the bf16 stream, widened on the way, and
// each row's sum of squares one more chain in the lanes.
//
// Why rows in the lanes: the released fn has 24 rows, which fill 24 of the 32 lanes of two weight slices. With
// activation rows in the lanes all 24 weight rows' sums take whole vectors, and one transposed activation column
// serves all of them. A prefill's mixes (`bench-decode --batch 256 --op-profile`, two threads, the released fn):
// 2.9-3.3 -> 2.1 ms a call (with the driver's split by activation rows, cpu_gemm.cpp). Reading the bf16 stream
// (no fp32 copy; the squares in the same pass, not a loop over the copy after it): a 2048-token prefill of the
// released dims' two layers (`deepinfer bench --input-lens 2048 --output-len 1 --num-prompts 5`, TTFT p50, three
// alternating rounds) 2649-2750 -> 2558-2574 ms.
namespace {

// 16 values of an activation row as fp32 (bf16 exactly so).
inline __m512 load_row16(const float* x) { return _mm512_loadu_ps(x); }
inline __m512 load_row16(const bf16* x) { return from_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))); }
inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return bf16_to_float(v); }

// R activation rows of x (row stride k) against weight rows w[0..valid) in the lanes (row stride k), each lane's
// sum the reference's chain. With `own` > 0 the lanes [valid, valid + own) hold rows [0, own) of x itself as
// weight rows (own <= R, valid + own <= 16): lane valid + a of acc[a] is then row a's sum of squares, x * x then
// the add with k in order from 0 -- the mHC statistic's chain (gemm_f32_squares_rows). (Those rows are widened
// twice a step, here and for the broadcasts: reading the lanes from the broadcasts' copy measured no faster.)
template <int R, class X>
void f32_ordered_tile(const float* w, int64_t k, int64_t valid, const X* x, int own, __m512 (&acc)[8]) {
#pragma GCC unroll 8
    for (int a = 0; a < R; ++a) acc[a] = _mm512_setzero_ps();
    int64_t col = 0;
    for (; col + 16 <= k; col += 16) {
        // Up to 4 rows (a decode step's: at the bus) each weight row's line 4 KB ahead into L2: the part's 9-16 rows,
        // 80 KB apart in the mixes, are more streams than the prefetchers keep ahead. In-process A/B (Zen 4, the
        // mixes): one thread n = 1 / 2 / 4 0.87-0.89 / 0.93-0.94 / 0.97-0.98x the time, two 0.85-0.98 / 0.85-0.98 /
        // 0.91-0.94x; n = 8 1.01-1.05x (compute-bound there), so not from 5 rows. (8 KB alike, 16 KB less, into L1
        // 1.2-1.5x the time.)
        if constexpr (R <= 4)
            for (int64_t r = 0; r < valid; ++r)
                _mm_prefetch(reinterpret_cast<const char*>(w + r * k + col + 1024), _MM_HINT_T1);
        __m512i blk[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r)
            blk[r] = r < valid          ? _mm512_castps_si512(_mm512_loadu_ps(w + r * k + col))
                     : r < valid + own ? _mm512_castps_si512(load_row16(x + (r - valid) * k + col))
                                       : _mm512_setzero_si512();
        transpose16(blk);
        // the rows' 16 values as fp32, broadcast from memory (bf16 rows widened once here: a scalar widening per
        // broadcast took 1.07-1.12x the time at 1 and 8 rows, two threads)
        alignas(64) float widened[R][16];
        const float* xr[R];
#pragma GCC unroll 8
        for (int a = 0; a < R; ++a) {
            if constexpr (std::is_same_v<X, float>) {
                xr[a] = x + a * k + col;
            } else {
                _mm512_store_ps(widened[a], load_row16(x + a * k + col));
                xr[a] = widened[a];
            }
        }
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c) {
            const __m512 wc = _mm512_castsi512_ps(blk[c]);
#pragma GCC unroll 8
            for (int a = 0; a < R; ++a) acc[a] = _mm512_add_ps(acc[a], mul_bcast(wc, xr[a] + c));
        }
    }
    for (; col < k; ++col) {
        alignas(64) float column[16] = {};
        for (int64_t r = 0; r < valid; ++r) column[r] = w[r * k + col];
        for (int r = 0; r < own; ++r) column[valid + r] = to_f32(x[r * k + col]);
        const __m512 wc = _mm512_load_ps(column);
#pragma GCC unroll 8
        for (int a = 0; a < R; ++a)
            acc[a] = _mm512_add_ps(acc[a], _mm512_mul_ps(wc, _mm512_set1_ps(to_f32(x[a * k + col]))));
    }
}

// ra (1-8) rows of x against weight rows [0, valid) of w, `own` of them with their squares (f32_ordered_tile).
template <class X>
void f32_ordered_rows(const float* w, int64_t k, int64_t valid, const X* x, int64_t ra, int own, __m512 (&acc)[8]) {
    switch (ra) {
        case 8: f32_ordered_tile<8>(w, k, valid, x, own, acc); break;
        case 7: f32_ordered_tile<7>(w, k, valid, x, own, acc); break;
        case 6: f32_ordered_tile<6>(w, k, valid, x, own, acc); break;
        case 5: f32_ordered_tile<5>(w, k, valid, x, own, acc); break;
        case 4: f32_ordered_tile<4>(w, k, valid, x, own, acc); break;
        case 3: f32_ordered_tile<3>(w, k, valid, x, own, acc); break;
        case 2: f32_ordered_tile<2>(w, k, valid, x, own, acc); break;
        default: f32_ordered_tile<1>(w, k, valid, x, own, acc); break;
    }
}

// Up to kLaneSums weight rows at once: their sums, the activation column and a product in registers.
constexpr int kLaneSums = 24;
static_assert(kF32LaneRows == 16, "a tile of activation rows fills the 16 lanes");
// The weights go through in chunks of kLaneChunkCols columns, transposed once into a buffer (24 KB, in L1) for up
// to kLaneTiles row tiles: each column's kLaneSums weights then lie side by side, broadcast from one pointer at
// fixed offsets. Read in place, the rows' stride (80 KB for the released fn, a multiple of 4 KB: every row in one
// L1 set) and their kLaneSums pointers (spilled) took 36.8 TSC cycles a column in a one-core scratch loop, 24.1
// from the buffer.
constexpr int64_t kLaneChunkCols = 256;
constexpr int kLaneTiles = 4;

// wt[c][j] = w[j][col0 + c] for the chunk's `width` columns, j < J (zero past `valid`): 16 columns at a time, by
// 16 x 16 transposes in registers.
template <int J>
void transpose_chunk(const float* w, int64_t k, int64_t valid, int64_t col0, int64_t width, float (*wt)[J]) {
    int64_t c0 = 0;
    for (; c0 + 16 <= width; c0 += 16)
        for (int j0 = 0; j0 < J; j0 += 16) {
            __m512i blk[16];
#pragma GCC unroll 16
            for (int r = 0; r < 16; ++r)
                blk[r] = j0 + r < valid ? _mm512_castps_si512(_mm512_loadu_ps(w + (j0 + r) * k + col0 + c0))
                                        : _mm512_setzero_si512();
            transpose16(blk);
            const __mmask16 keep = J - j0 >= 16 ? 0xffff : lane_mask(J - j0);
#pragma GCC unroll 16
            for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(wt[c0 + c] + j0, keep, _mm512_castsi512_ps(blk[c]));
        }
    for (; c0 < width; ++c0)
        for (int j = 0; j < J; ++j) wt[c0][j] = j < valid ? w[j * k + col0 + c0] : 0.0f;
}

// Row tiles [0, tiles) of 16 activation rows from x (fp32 or bf16, row stride k) against the weight rows
// w[0..valid) (row stride k, valid <= J <= kLaneSums): out[(16 i + r) * ldo + j]; with kSquares also each row's
// sum of squares, in order, to squares[16 i + r] (the mHC mixes' statistic: one more chain in the lanes).
template <int J, bool kSquares, class X>
void rows_in_lanes(const X* x, int64_t k, int tiles, const float* w, int64_t valid, float* out, int64_t ldo,
                   float* squares) {
    alignas(64) float wt[kLaneChunkCols][J];             // the chunk transposed, rows past `valid` zero
    alignas(64) float sums[kLaneTiles][J + 1][16];       // each tile's sums between chunks (its squares' last)
    alignas(64) float columns[16][16];                    // columns[c][r]: x[r][col + c]
    if (k == 0) std::memset(sums, 0, sizeof(sums));      // (empty sums: zero, as the reference's)
    for (int64_t col0 = 0; col0 < k; col0 += kLaneChunkCols) {
        const int64_t width = k - col0 < kLaneChunkCols ? k - col0 : kLaneChunkCols;
        transpose_chunk<J>(w, k, valid, col0, width, wt);
        for (int i = 0; i < tiles; ++i) {
            const X* xi = x + i * 16 * k;
            __m512 acc[J], sq = _mm512_setzero_ps();
#pragma GCC unroll 24
            for (int j = 0; j < J; ++j) acc[j] = col0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(sums[i][j]);
            if (kSquares && col0 > 0) sq = _mm512_load_ps(sums[i][J]);
            for (int64_t c0 = 0; c0 < width; c0 += 16) {
                const int64_t col = col0 + c0, cols = width - c0 < 16 ? width - c0 : 16;
                if (cols == 16) {
                    __m512i blk[16];
#pragma GCC unroll 16
                    for (int r = 0; r < 16; ++r) blk[r] = _mm512_castps_si512(load_row16(xi + r * k + col));
                    transpose16(blk);
#pragma GCC unroll 16
                    for (int c = 0; c < 16; ++c) _mm512_store_si512(columns[c], blk[c]);
                } else {
                    for (int64_t c = 0; c < cols; ++c)
                        for (int r = 0; r < 16; ++r) columns[c][r] = to_f32(xi[r * k + col + c]);
                }
                for (int64_t c = 0; c < cols; ++c) {
                    const __m512 xc = _mm512_load_ps(columns[c]);
                    const float* wc = wt[c0 + c];
#pragma GCC unroll 24
                    for (int j = 0; j < J; ++j)
                        acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(xc, _mm512_set1_ps(wc[j])));
                    if constexpr (kSquares) sq = _mm512_add_ps(sq, _mm512_mul_ps(xc, xc));
                }
            }
#pragma GCC unroll 24
            for (int j = 0; j < J; ++j) _mm512_store_ps(sums[i][j], acc[j]);
            if constexpr (kSquares) _mm512_store_ps(sums[i][J], sq);
        }
    }
    for (int i = 0; i < tiles; ++i) {
        for (int r = 0; r < 16; ++r)
            for (int j = 0; j < valid; ++j) out[(16 * i + r) * ldo + j] = sums[i][j][r];
        if constexpr (kSquares) _mm512_storeu_ps(squares + 16 * i, _mm512_load_ps(sums[i][J]));
    }
}

// `tiles` tiles of 16 rows of x against all `rows` weight rows of w (row stride k), kLaneTiles tiles at a time
// against kLaneSums weight rows (then 8, 12 or 16 of them); squares: each row's sum of squares too, where not null.
template <class X>
void tiles_in_lanes(const X* x, int64_t tiles, int64_t k, const float* w, int64_t rows, float* out, int64_t ldo,
                    float* squares) {
    for (int64_t i = 0; i < tiles; i += kLaneTiles) {
        const int count = static_cast<int>(tiles - i < kLaneTiles ? tiles - i : kLaneTiles);
        const X* xi = x + i * 16 * k;
        for (int64_t j = 0; j < rows; j += kLaneSums) {
            const int64_t valid = rows - j < kLaneSums ? rows - j : kLaneSums;
            const float* wj = w + j * k;
            float* o = out + i * 16 * ldo + j;
            float* sq = j == 0 && squares ? squares + i * 16 : nullptr;  // (with the first weight rows)
            if (sq) {
                if (valid <= 8) rows_in_lanes<8, true>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 12) rows_in_lanes<12, true>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 16) rows_in_lanes<16, true>(xi, k, count, wj, valid, o, ldo, sq);
                else rows_in_lanes<kLaneSums, true>(xi, k, count, wj, valid, o, ldo, sq);
            } else {
                if (valid <= 8) rows_in_lanes<8, false>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 12) rows_in_lanes<12, false>(xi, k, count, wj, valid, o, ldo, sq);
                else if (valid <= 16) rows_in_lanes<16, false>(xi, k, count, wj, valid, o, ldo, sq);
                else rows_in_lanes<kLaneSums, false>(xi, k, count, wj, valid, o, ldo, sq);
            }
        }
    }
}

}  // namespace

void gemm_f32(const DenseGemmTask& t) {
    auto* out = static_cast<float*>(t.out);
    const auto* w = static_cast<const float*>(t.w);
    const auto* x = static_cast<const float*>(t.x);
    // whole tiles of 16 activation rows in the lanes
    const int64_t tiled = t.n / 16 * 16;
    tiles_in_lanes(x, tiled / 16, t.k, w, t.rows, out, t.ldo, nullptr);
    for (int64_t j = 0; j < t.rows; j += 16) {
        const int64_t valid = t.rows - j < 16 ? t.rows - j : 16;
        const __mmask16 mask = lane_mask(valid);
        for (int64_t i = tiled; i < t.n; i += 8) {
            const int64_t ra = t.n - i < 8 ? t.n - i : 8;
            const float* wj = w + j * t.k;
            const float* xi = x + i * t.k;
            __m512 acc[8];
            f32_ordered_rows(wj, t.k, valid, xi, ra, 0, acc);
            for (int64_t a = 0; a < ra; ++a) _mm512_mask_storeu_ps(out + (i + a) * t.ldo + j, mask, acc[a]);
        }
    }
}

void gemm_f32_squares_tiles(const bf16* x, int64_t tiles, int64_t k, const float* fn, int64_t fn_rows, float* out,
                            int64_t ldo, float* squares) {
    tiles_in_lanes(x, tiles, k, fn, fn_rows, out, ldo, squares);
}

// Rows of x in tiles of up to 8 against weight rows in groups of 16 lanes, read from the bf16 stream as they are
// (f32_squares_rows.h): the statistic's chains run in lanes beside the sums instead of a pass of their own.
void gemm_f32_squares_rows(const bf16* x, int64_t n, int64_t k, const float* fn, int64_t fn_rows, float* out,
                           int64_t ldo, float* squares) {
    auto tile = [k](const float* w, int64_t valid, const bf16* xi, int64_t ra, int own, float (&lanes)[8][16]) {
        __m512 acc[8];
        f32_ordered_rows(w, k, valid, xi, ra, own, acc);
        for (int64_t a = 0; a < ra; ++a) _mm512_store_ps(lanes[a], acc[a]);
    };
    f32_squares_rows<16, 8>(x, n, k, fn, fn_rows, out, ldo, squares, tile);
}

}  // namespace deepinfer::backend::cpu::avx512
