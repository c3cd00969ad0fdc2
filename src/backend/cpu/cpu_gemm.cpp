// Drivers of act_quant and the dense GEMMs (the quantized ones: cpu_gemm_quant.cpp): weights are split over
// threads in 16-row groups, each thread streaming a contiguous part of the weight once.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/drivers.h"
#include "backend/cpu/packing.h"
#include "core/check.h"
#include "core/cpu_features.h"
#include "core/scratch_pool.h"

namespace deepinfer::backend::cpu {

ThreadScratch& thread_scratch() {
    thread_local ThreadScratch scratch;
    return scratch;
}

void for_chunks(ThreadPool& pool, int64_t n, int64_t chunk, const std::function<void(int)>& setup,
                const std::function<void(int64_t, int64_t, int)>& fn) {
    if (n <= 0) return;
    if (pool.size() == 1) {  // one call over all of it: no per-chunk setup in fn to repeat
        pool.run_claimed_chunks(1, [&](int64_t, int) { fn(0, n, 0); }, setup);
        return;
    }
    chunk = std::max<int64_t>(chunk, 1);
    pool.run_claimed_chunks(
        (n + chunk - 1) / chunk, [&](int64_t c, int t) { fn(c * chunk, std::min(n, (c + 1) * chunk), t); }, setup);
}

int64_t chunk_size(int64_t n, const ThreadPool& pool, int64_t min_chunk) {
    return std::max(min_chunk, n / (8 * static_cast<int64_t>(pool.size())));
}

int64_t tile_gemm_units(int64_t pairs, int64_t unit_pairs, const ThreadPool& pool) {
    const int64_t threads = pool.size();
    return std::min(pairs, threads * ((pairs + threads * unit_pairs - 1) / (threads * unit_pairs)));
}

void act_quant(const IsaOps& ops, const bf16* x, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales,
               ThreadPool& pool) {
    DI_CHECK_MSG(k % kActQuantGroup == 0, "act_quant k {} not a multiple of 32", k);
    pool.parallel_for(static_cast<size_t>(n), [&](size_t r0, size_t r1, int) {
        ops.act_quant_rows(x, k, codes, scales, static_cast<int64_t>(r0), static_cast<int64_t>(r1));
    });
}

namespace {

// Rows of a dense weight split over threads in 16-row groups; a weight of fewer than two groups per thread
// (the mHC mixes' 24 rows, a router's 16) in even shares of 4-row units instead, so that no thread streams
// twice the bytes of another (24 rows as 16 + 8 ran at one core's bandwidth). Every output is computed alone
// (one dot product per row), so the split does not change any result.
void gemm_dense(void (*run)(const DenseGemmTask&), const void* x, int64_t n, int64_t k, const void* w, int64_t rows,
                int64_t w_elem_bytes, void* out, int64_t out_elem_bytes, int64_t ldo, ThreadPool& pool) {
    if (n == 0 || rows == 0) return;
    const int64_t threads = static_cast<int64_t>(pool.size());
    const bool few = rows < 2 * kGroupRows * threads;
    const int64_t unit_rows = few ? 4 : kGroupRows, units = (rows + unit_rows - 1) / unit_rows;
    const int64_t chunk = few ? (units + threads - 1) / threads : chunk_size(units, pool, 1);
    for_chunks(pool, units, chunk, [](int) {}, [&](int64_t g0, int64_t g1, int) {
        const int64_t j0 = g0 * unit_rows, j1 = std::min(rows, g1 * unit_rows);
        ThreadScratch& s = thread_scratch();
        s.dense.ensure(static_cast<size_t>(dense_scratch_floats(n, k, w_elem_bytes)) * sizeof(float));
        run(DenseGemmTask{x, n, k, static_cast<const uint8_t*>(w) + j0 * k * w_elem_bytes, j1 - j0,
                          static_cast<uint8_t*>(out) + j0 * out_elem_bytes, ldo, s.dense.as<float>()});
    });
}

}  // namespace

namespace {
// The kBf16Tiles layout of w where it has one and the table's tile kernel (`has_kernel`) reads it, else null (the
// weight is read as it is). Both bf16 weight GEMMs take it.
const PackedWeight* bf16_tiles_of(const Bf16Matrix& w, bool has_kernel) {
    const PackedWeight* pw = w.prepared;
    if (!pw || pw->layout != PackedLayout::kBf16Tiles || !has_kernel) return nullptr;
    DI_CHECK_MSG(pw->rows == w.rows && pw->cols == w.cols, "prepared bf16 weight {}x{} vs matrix {}x{}", pw->rows,
                 pw->cols, w.rows, w.cols);
    return pw;
}
}  // namespace

void gemm_bf16(const IsaOps& ops, const bf16* x, int64_t n, const Bf16Matrix& w, bf16* out, int64_t ldo,
               ThreadPool& pool) {
    const PackedWeight* pw = bf16_tiles_of(w, ops.gemm_bf16_tiles && ops.bf16_pair_tiles);
    if (!pw) {
        gemm_dense(ops.gemm_bf16, x, n, w.cols, w.data, w.rows, 2, out, 2, ldo, pool);
        return;
    }
    if (n == 0 || w.rows == 0) return;
    // On tiles (a weight prepares kBf16Tiles only where they run, for every n: rows stay invariant). The rows go
    // once per call into pairs of A tiles (in the calling thread's scratch), then pairs of row groups over the pool.
    const int64_t k = w.cols, kb_count = k / 32, groups = row_groups(w.rows), group_pairs = (groups + 1) / 2;
    AlignedBuffer& tiles = thread_scratch().pair_tiles;
    tiles.ensure(static_cast<size_t>(bf16_pair_tiles_elems(n, k)) * sizeof(bf16));
    auto* acts = reinterpret_cast<bf16*>(tiles.data());
    pool.parallel_for(static_cast<size_t>((n + 31) / 32), [&](size_t p0, size_t p1, int) {
        ops.bf16_pair_tiles(x, n, k, static_cast<int64_t>(p0), static_cast<int64_t>(p1), acts);
    });
    // (where the rows span more than one row tile, units of about kBf16TileUnitPairs pairs: tile_gemm_units)
    const int64_t units = tile_gemm_units(group_pairs, kBf16TileUnitPairs, pool);
    const int64_t chunk = n > kGroupRows ? (group_pairs + units - 1) / units : chunk_size(group_pairs, pool, 1);
    for_chunks(pool, group_pairs, chunk, [](int) {}, [&](int64_t q0, int64_t q1, int) {
        ThreadScratch& s = thread_scratch();
        const int64_t g0 = 2 * q0, g1 = std::min(groups, 2 * q1);
        const int64_t rows = std::min(w.rows, g1 * kGroupRows) - g0 * kGroupRows;
        s.dense.ensure(static_cast<size_t>(bf16_tile_sums_floats(n, k, rows)) * sizeof(float));
        ops.gemm_bf16_tiles(DenseGemmTask{acts, n, k, pw->data + g0 * kb_count * kBf16TileBytes, rows,
                                          out + g0 * kGroupRows, ldo, s.dense.as<float>()});
    });
}

void split_bf16x3_rows(const float* x, int64_t n, int64_t k, int64_t i0, int64_t i1, bf16* out) {
    auto* hi = reinterpret_cast<uint16_t*>(out);
    uint16_t* mid = hi + n * k;
    uint16_t* lo = mid + n * k;
    auto bits = [](float v) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        return b;
    };
    auto value = [](uint32_t b) {
        float v;
        std::memcpy(&v, &b, 4);
        return v;
    };
    // Branch-free, so the compiler vectorizes it (a 2048-row prefill splits 10 M values per call).
    for (int64_t e = i0 * k; e < i1 * k; ++e) {
        const uint32_t b = bits(x[e]);
        // x - hi is exact (same sign and binade, the low 16 bits of the significand), so is the rest of it
        const uint32_t hb = b & 0xffff0000u, rb = bits(x[e] - value(hb)), mb = rb & 0xffff0000u;
        const uint32_t lb = bits(value(rb) - value(mb));
        // infinity, or NaN (kept a NaN, quiet): hi alone
        const bool special = (b & 0x7f800000u) == 0x7f800000u;
        const uint32_t quiet = (b & 0x7fffffu) != 0 ? 0x40u : 0u;
        hi[e] = static_cast<uint16_t>(special ? (b >> 16 | quiet) : hb >> 16);
        mid[e] = static_cast<uint16_t>(special ? 0u : mb >> 16);
        lo[e] = static_cast<uint16_t>(special ? 0u : lb >> 16);
    }
}

void prepare_bf16(const IsaOps& ops, const Bf16Matrix& w, PackedWeight* out, ThreadPool& pool) {
    out->rows = w.rows;
    out->cols = w.cols;
    // Below kBf16TilesMinRows rows the FMA kernel reads the weight as it is: the tile kernel splits every row of x
    // into three bf16 planes (6 bytes written and read again per value), which only many weight rows pay back (2
    // threads, k = 5120, n = 2048: 16 rows 14.6 ms on tiles, 3.2 ms by FMAs; 64 rows even; 128 rows 1.7x faster on
    // tiles; 16 rows at n = 1 14 -> 4 us).
    if (!ops.gemm_f32_bf16w_tiles || !amx_enabled() || !w.data || w.cols % 32 != 0 || w.rows < kBf16TilesMinRows) {
        out->layout = PackedLayout::kNone;
        return;
    }
    prepare_bf16_tiles(w, out, pool);
}

void gemm_f32_bf16w(const IsaOps& ops, const float* x, int64_t n, const Bf16Matrix& w, float* out, int64_t ldo,
                    ThreadPool& pool) {
    const PackedWeight* pw = bf16_tiles_of(w, ops.gemm_f32_bf16w_tiles != nullptr);
    if (!pw) {
        if (!ops.gemm_f32_pairs_bf16w || n < kF32PairsMinRows) {
            gemm_dense(ops.gemm_f32_bf16w, x, n, w.cols, w.data, w.rows, 2, out, 4, ldo, pool);
            return;
        }
        // x into pairs form once per call (in the calling thread's scratch) for every thread's rows
        const int64_t k = w.cols;
        AlignedBuffer& pairs = thread_scratch().f32_pairs;
        pairs.ensure(static_cast<size_t>(n * f32_pairs_stride(k)) * sizeof(float));
        pool.parallel_for(static_cast<size_t>(n), [&](size_t i0, size_t i1, int) {
            ops.f32_pair_rows(x, k, static_cast<int64_t>(i0), static_cast<int64_t>(i1), pairs.as<float>());
        }, 16);
        gemm_dense(ops.gemm_f32_pairs_bf16w, pairs.data(), n, k, w.data, w.rows, 2, out, 4, ldo, pool);
        return;
    }
    if (n == 0 || w.rows == 0) return;
    // The rows split once per call into the planes (in the calling thread's scratch), then row groups over the pool.
    const int64_t k = w.cols, kb_count = k / 32, groups = row_groups(w.rows);
    AlignedBuffer& planes = thread_scratch().planes;
    planes.ensure(static_cast<size_t>(3 * n * k) * sizeof(bf16));
    auto* split = reinterpret_cast<bf16*>(planes.data());
    // (over the pool: serial, a 2048-row call's split took longer than its products)
    pool.parallel_for(static_cast<size_t>(n), [&](size_t i0, size_t i1, int) {
        split_bf16x3_rows(x, n, k, static_cast<int64_t>(i0), static_cast<int64_t>(i1), split);
    }, 16);
    // Units of whole passes of the tile kernel (kBf16TilePassGroups groups: a pass loads the row tile's planes once
    // for all its groups, and each unit streams every row's planes once). Units of one group made the released
    // router (384 x 5120) passes of one group each (2 threads: n = 512 10.8 -> 5.0 ms, n = 2048 48.8 -> 24.1 ms;
    // the ratio-2 compressor's 512 x 5120 at n = 512 8.5 -> 5.9 ms).
    const int64_t chunk = (chunk_size(groups, pool, kBf16TilePassGroups) + kBf16TilePassGroups - 1) /
                          kBf16TilePassGroups * kBf16TilePassGroups;
    for_chunks(pool, groups, chunk, [](int) {}, [&](int64_t g0, int64_t g1, int) {
        ops.gemm_f32_bf16w_tiles(DenseGemmTask{split, n, k, pw->data + g0 * kb_count * kBf16TileBytes,
                                               std::min(w.rows, g1 * kGroupRows) - g0 * kGroupRows,
                                               out + g0 * kGroupRows, ldo, nullptr});
    });
}

void gemm_f32(const IsaOps& ops, const float* x, int64_t n, const F32Matrix& w, float* out, int64_t ldo,
              ThreadPool& pool) {
    if (n < 2 * kF32LaneRows) {
        gemm_dense(ops.gemm_f32, x, n, w.cols, w.data, w.rows, 4, out, 4, ldo, pool);
        return;
    }
    // Many rows (a prefill's mHC mixes): tiles of kF32LaneRows activation rows over the pool, each against every
    // weight row -- the AVX-512 kernel holds 24 weight rows' sums per tile (the released fn has 24), where a split
    // of the weight rows gave each thread 12 of them.
    const int64_t k = w.cols;
    pool.parallel_for(static_cast<size_t>((n + kF32LaneRows - 1) / kF32LaneRows), [&](size_t a, size_t b, int) {
        const int64_t i0 = static_cast<int64_t>(a) * kF32LaneRows;
        const int64_t i1 = std::min(n, static_cast<int64_t>(b) * kF32LaneRows);
        ops.gemm_f32(DenseGemmTask{x + i0 * k, i1 - i0, k, w.data, w.rows, out + i0 * ldo, ldo, nullptr});
    });
}

void gemm_f32_squares(const IsaOps& ops, const bf16* x, int64_t n, const F32Matrix& w, float* out, float* squares,
                      ThreadPool& pool) {
    const int64_t k = w.cols;
    // Whole tiles of kF32LaneRows rows, in one pass over x as bf16 (no fp32 copy of a prefill's stream: 2048 rows x
    // 20480 are 168 MB), the squares a chain beside the sums. Tiles enough for the threads go over the pool tile by
    // tile; fewer (a batch of 16-31 rows) each split by weight rows, the part with the first rows taking the squares
    // too -- every output and square keeps its chain, so the bits are the same. (A decode step's 16 rows, Zen 4: the
    // widened path on two threads 390-435 us a call, the tile on one 387, the tile split over two 220.)
    // (no weight rows: the rows' kernel below sums the squares alone)
    const int64_t tiles = n >= kF32LaneRows && w.rows > 0 ? n / kF32LaneRows : 0;
    const auto threads = static_cast<int64_t>(pool.size());
    if (tiles >= threads) {
        pool.parallel_for(static_cast<size_t>(tiles), [&](size_t a, size_t b, int) {
            const int64_t i0 = static_cast<int64_t>(a) * kF32LaneRows;
            ops.gemm_f32_squares_tiles(x + i0 * k, static_cast<int64_t>(b - a), k, w.data, w.rows, out + i0 * w.rows,
                                       w.rows, squares + i0);
        });
    } else if (tiles > 0) {
        // parts of at least 8 weight rows (the kernels' narrowest sums)
        const int64_t parts = std::max<int64_t>(1, std::min(threads / tiles, (w.rows + 7) / 8));
        const int64_t part_rows = (w.rows + parts - 1) / parts;
        pool.parallel_for(static_cast<size_t>(tiles * parts), [&](size_t a, size_t b, int) {
            for (auto item = static_cast<int64_t>(a); item < static_cast<int64_t>(b); ++item) {
                const int64_t i0 = item / parts * kF32LaneRows, j0 = item % parts * part_rows;
                const int64_t j1 = std::min(w.rows, j0 + part_rows);
                if (j0 < j1)
                    ops.gemm_f32_squares_tiles(x + i0 * k, 1, k, w.data + j0 * k, j1 - j0, out + i0 * w.rows + j0,
                                               w.rows, j0 == 0 ? squares + i0 : nullptr);
            }
        }, 1);
    }
    // The rest (a decode step's rows): parts of the weight rows over the pool, read from the bf16 stream, the first
    // part's lanes also carrying the squares' chains (gemm_f32_squares_rows). The lanes are the weight rows plus the
    // squares' (a tile's rows: half a register's lanes, up to 8 on AVX-512 and 4 on AVX2) and go out in even parts
    // of at most a register's lanes (one pass over x each), at least half that a part where there are threads for
    // them; the squares' lanes lead part 0. (Parts by weight rows alone left part 0 two passes at 8 rows on AVX-512:
    // 1.4-1.5x the time.)
    const int64_t i0 = tiles * kF32LaneRows, rest = n - i0;
    if (rest == 0) return;
    const int64_t width = ops.vector_floats, half = width / 2;
    const int64_t own = std::min<int64_t>(rest, half), lanes = w.rows + own;
    const int64_t parts = std::max((lanes + width - 1) / width, std::min(threads, (lanes + half - 1) / half));
    auto first_row = [&](int64_t part) { return std::clamp(part * lanes / parts - own, int64_t{0}, w.rows); };
    pool.parallel_for(static_cast<size_t>(parts), [&](size_t a, size_t b, int) {
        for (auto part = static_cast<int64_t>(a); part < static_cast<int64_t>(b); ++part) {
            const int64_t j0 = part == 0 ? 0 : first_row(part), j1 = first_row(part + 1);
            if (j0 < j1 || part == 0)
                ops.gemm_f32_squares_rows(x + i0 * k, rest, k, w.data + j0 * k, j1 - j0, out + i0 * w.rows + j0,
                                          w.rows, part == 0 ? squares + i0 : nullptr);
        }
    }, 1);
}

}  // namespace deepinfer::backend::cpu
