// Drivers of act_quant and the GEMMs: weights are split over threads in 16-row groups (each thread streams
// a contiguous part of the weight once); activations go through in chunks of kActRowChunk rows, each
// thread decoding the chunk for itself so one pool dispatch covers a chunk.
#include <algorithm>
#include <atomic>

#include "backend/cpu/drivers.h"
#include "backend/cpu/packing.h"
#include "core/check.h"

namespace deepinfer::backend::cpu {

ThreadScratch& thread_scratch() {
    thread_local ThreadScratch scratch;
    return scratch;
}

void for_chunks(ThreadPool& pool, int64_t n, int64_t chunk, const std::function<void(int)>& setup,
                const std::function<void(int64_t, int64_t, int)>& fn) {
    if (n <= 0) return;
    chunk = std::max<int64_t>(chunk, 1);
    const int64_t chunks = (n + chunk - 1) / chunk;
    if (pool.size() == 1 || chunks == 1) {
        setup(0);
        fn(0, n, 0);
        return;
    }
    std::atomic<int64_t> next{0};
    pool.run_on_all([&](int t) {
        int64_t c = next.fetch_add(1, std::memory_order_relaxed);
        if (c >= chunks) return;
        setup(t);
        for (; c < chunks; c = next.fetch_add(1, std::memory_order_relaxed))
            fn(c * chunk, std::min(n, (c + 1) * chunk), t);
    });
}

namespace {
// Work items per call: about 8 chunks per thread balances a late thread without making chunks so small
// that the per-chunk setup (activation decode, panel builds) matters.
int64_t chunk_size(int64_t n, const ThreadPool& pool, int64_t min_chunk) {
    return std::max(min_chunk, n / (8 * static_cast<int64_t>(pool.size())));
}
}  // namespace

void act_quant(const IsaOps& ops, const bf16* x, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales,
               ThreadPool& pool) {
    DI_CHECK_MSG(k % kActQuantGroup == 0, "act_quant k {} not a multiple of 32", k);
    pool.parallel_for(static_cast<size_t>(n), [&](size_t r0, size_t r1, int) {
        ops.act_quant_rows(x, k, codes, scales, static_cast<int64_t>(r0), static_cast<int64_t>(r1));
    });
}

namespace {

// What differs between the fp8 and MXFP4 GEMMs for the driver.
struct QuantWeight {
    PackedLayout layout;
    int64_t rows, cols;
    const PackedWeight* prepared;
    int64_t code_bytes_per_group, scale_bytes_per_group;
    void (*pack)(const void* w, int64_t g0, int64_t g1, uint8_t* codes, uint8_t* scales);
    const void* canonical;
    void (*run)(const QuantGemmTask& task);
};

// Groups packed per step when a weight was not prepared (64 rows: the slab stays in L2; even: whole pairs).
constexpr int64_t kPackGroups = 4;

// bf16 results into out, or fp32 results into out_f32 when it is set (row-parallel partial sums).
void gemm_quant(const IsaOps& ops, const Fp8Acts& a, const QuantWeight& w, bf16* out, int64_t ldo, ThreadPool& pool,
                float* out_f32 = nullptr) {
    DI_CHECK_MSG(a.k == w.cols && a.k % 32 == 0, "GEMM k {} vs weight cols {} (must match, multiple of 32)", a.k,
                 w.cols);
    if (a.n == 0 || w.rows == 0) return;
    const int64_t groups = row_groups(w.rows), kb_count = a.k / 32;
    const PackedWeight* pw = w.prepared && w.prepared->layout == w.layout ? w.prepared : nullptr;
    if (pw)
        DI_CHECK_MSG(pw->rows == w.rows && pw->cols == w.cols, "prepared weight {}x{} vs matrix {}x{}", pw->rows,
                     pw->cols, w.rows, w.cols);
    for (int64_t i0 = 0; i0 < a.n; i0 += kActRowChunk) {
        const int64_t ni = std::min(kActRowChunk, a.n - i0);
        auto setup = [&](int) {
            ThreadScratch& s = thread_scratch();
            s.acts.ensure(static_cast<size_t>(ni * a.k * ops.act_bytes));
            s.act_scales.ensure(static_cast<size_t>(ni * kb_count) * sizeof(float));
            s.gemm.ensure(static_cast<size_t>(gemm_scratch_floats(a.k)) * sizeof(float));
            ops.decode_acts(a.codes + i0 * a.k, a.scales + i0 * kb_count, ni, a.k, s.acts.data(),
                            s.act_scales.as<float>());
        };
        // chunks of whole pairs of row groups: the packed layout interleaves a pair's chunks (packing.h)
        const int64_t chunk = (chunk_size(groups, pool, pw ? 2 : kPackGroups) + 1) / 2 * 2;
        for_chunks(
            pool, groups, chunk, setup, [&](int64_t g0, int64_t g1, int) {
                ThreadScratch& s = thread_scratch();
                QuantGemmTask task{s.acts.data(), s.act_scales.as<float>(), ni, a.k, nullptr, nullptr, 0, 0, nullptr,
                                   ldo,           s.gemm.as<float>()};
                task.plain_scales = pw && pw->plain_scales;
                auto run_groups = [&](int64_t g, int64_t count, const uint8_t* codes, const uint8_t* scales) {
                    task.codes = codes;
                    task.scales = scales;
                    task.groups = count;
                    task.rows = std::min(w.rows, (g + count) * kGroupRows) - g * kGroupRows;
                    task.out = out ? out + i0 * ldo + g * kGroupRows : nullptr;
                    task.out_f32 = out_f32 ? out_f32 + i0 * ldo + g * kGroupRows : nullptr;
                    w.run(task);
                };
                if (pw) {
                    const uint8_t* base = pw->data.data();
                    run_groups(g0, g1 - g0, base + g0 * w.code_bytes_per_group,
                               base + groups * w.code_bytes_per_group + g0 * w.scale_bytes_per_group);
                    return;
                }
                s.pack.ensure(static_cast<size_t>(kPackGroups * (w.code_bytes_per_group + w.scale_bytes_per_group)));
                uint8_t* codes = s.pack.data();
                uint8_t* scales = codes + kPackGroups * w.code_bytes_per_group;
                for (int64_t g = g0; g < g1; g += kPackGroups) {
                    const int64_t count = std::min(kPackGroups, g1 - g);
                    w.pack(w.canonical, g, g + count, codes, scales);
                    run_groups(g, count, codes, scales);
                }
            });
    }
}

}  // namespace

namespace {
QuantWeight fp8_weight(const IsaOps& ops, const Fp8Matrix& w) {
    return QuantWeight{PackedLayout::kFp8R16K4,
                  w.rows,
                  w.cols,
                  w.prepared,
                  fp8_packed_code_bytes(1, w.cols),
                  fp8_packed_scale_bytes(1, w.cols),
                  [](const void* m, int64_t g0, int64_t g1, uint8_t* codes, uint8_t* scales) {
                      pack_fp8_groups(*static_cast<const Fp8Matrix*>(m), g0, g1, codes, scales);
                  },
                  &w,
                  ops.gemm_fp8};
}
}  // namespace

void gemm_fp8(const IsaOps& ops, const Fp8Acts& a, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    gemm_quant(ops, a, fp8_weight(ops, w), out, ldo, pool);
}

void gemm_fp8_f32(const IsaOps& ops, const Fp8Acts& a, const Fp8Matrix& w, float* out, int64_t ldo, ThreadPool& pool) {
    gemm_quant(ops, a, fp8_weight(ops, w), nullptr, ldo, pool, out);
}

void gemm_fp4(const IsaOps& ops, const Fp8Acts& a, const Fp4Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    QuantWeight q{PackedLayout::kFp4R16K8,
                  w.rows,
                  w.cols,
                  w.prepared,
                  fp4_packed_code_bytes(1, w.cols),
                  fp4_packed_scale_bytes(1, w.cols),
                  [](const void* m, int64_t g0, int64_t g1, uint8_t* codes, uint8_t* scales) {
                      pack_fp4_groups(*static_cast<const Fp4Matrix*>(m), g0, g1, codes, scales);
                  },
                  &w,
                  ops.gemm_fp4};
    gemm_quant(ops, a, q, out, ldo, pool);
}

namespace {

// Rows of a dense weight split over threads in 16-row groups.
void gemm_dense(void (*run)(const DenseGemmTask&), const void* x, int64_t n, int64_t k, const void* w, int64_t rows,
                int64_t w_elem_bytes, void* out, int64_t out_elem_bytes, int64_t ldo, ThreadPool& pool) {
    if (n == 0 || rows == 0) return;
    const int64_t groups = row_groups(rows);
    for_chunks(pool, groups, chunk_size(groups, pool, 1), [](int) {}, [&](int64_t g0, int64_t g1, int) {
        const int64_t j0 = g0 * kGroupRows, j1 = std::min(rows, g1 * kGroupRows);
        run(DenseGemmTask{x, n, k, static_cast<const uint8_t*>(w) + j0 * k * w_elem_bytes, j1 - j0,
                          static_cast<uint8_t*>(out) + j0 * out_elem_bytes, ldo});
    });
}

}  // namespace

void gemm_bf16(const IsaOps& ops, const bf16* x, int64_t n, const Bf16Matrix& w, bf16* out, int64_t ldo,
               ThreadPool& pool) {
    gemm_dense(ops.gemm_bf16, x, n, w.cols, w.data, w.rows, 2, out, 2, ldo, pool);
}

void gemm_f32_bf16w(const IsaOps& ops, const float* x, int64_t n, const Bf16Matrix& w, float* out, int64_t ldo,
                    ThreadPool& pool) {
    gemm_dense(ops.gemm_f32_bf16w, x, n, w.cols, w.data, w.rows, 2, out, 4, ldo, pool);
}

void gemm_f32(const IsaOps& ops, const float* x, int64_t n, const F32Matrix& w, float* out, int64_t ldo,
              ThreadPool& pool) {
    gemm_dense(ops.gemm_f32, x, n, w.cols, w.data, w.rows, 4, out, 4, ldo, pool);
}

}  // namespace deepinfer::backend::cpu
