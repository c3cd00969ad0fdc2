// Drivers of sparse attention and indexer scores: work split over (query, head group) or (key block,
// query) so both one decode query and a long prefill keep every thread busy. Head dims that are not a
// multiple of 32 (never the case in the released model: 512 and 128) use the scalar reference.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/drivers.h"
#include "backend/cpu/x86/x86_tables.h"
#include "backend/ref/ref_kernels.h"
#include "core/check.h"

namespace deepinfer::backend::cpu {

void sparse_attn(const IsaOps& ops, const bf16* q, int64_t m, int heads, int dim, const bf16* kv, const int32_t* idx,
                 int topk, const float* sink, float scale, bf16* out, ThreadPool& pool) {
    if (dim % 32 != 0) {
        ref::sparse_attn(q, m, heads, dim, kv, idx, topk, sink, scale, out, pool);
        return;
    }
    if (m == 0 || heads == 0) return;
    // Split heads only as far as needed to give every thread work (each split repeats the kv gathers).
    const int64_t want = 2 * static_cast<int64_t>(pool.size());
    int per_group = heads;
    while (per_group > 4 && m * ((heads + per_group - 1) / per_group) < want) per_group = (per_group + 1) / 2;
    const int groups = (heads + per_group - 1) / per_group;
    for_chunks(
        pool, m * groups, 1, [&](int) { thread_scratch().attn.ensure(sparse_attn_scratch_bytes(per_group, dim)); },
        [&](int64_t b, int64_t e, int) {
            ThreadScratch& s = thread_scratch();
            for (int64_t task = b; task < e; ++task) {
                const int64_t i = task / groups;
                const int h0 = static_cast<int>(task % groups) * per_group;
                const int h1 = std::min(heads, h0 + per_group);
                ops.sparse_attn(
                    SparseAttnTask{q, heads, dim, kv, idx, topk, sink, scale, out, i, i + 1, h0, h1, s.attn.data()});
            }
        });
}

void index_scores(const IsaOps& ops, const bf16* q, int64_t m, int heads, int dim, const bf16* keys, int64_t n,
                  const bf16* w, float* out, int64_t ldo, ThreadPool& pool) {
    if (dim % 32 != 0) {
        ref::index_scores(q, m, heads, dim, keys, n, w, out, ldo, pool);
        return;
    }
    if (m == 0 || n == 0) return;
    constexpr int64_t kKeyBlock = 64;
    const int64_t key_blocks = (n + kKeyBlock - 1) / kKeyBlock;
    const int64_t tasks = key_blocks * m;
    for_chunks(
        pool, tasks, std::max<int64_t>(1, tasks / (8 * static_cast<int64_t>(pool.size()))),
        [&](int) { thread_scratch().attn.ensure(index_scores_scratch_bytes(heads, dim)); },
        [&](int64_t b, int64_t e, int) {
            // Tasks are numbered key block major, so a range is a run of queries per key block: one
            // transpose of the block serves all of them.
            for (int64_t task = b; task < e;) {
                const int64_t kb = task / m, i0 = task % m;
                const int64_t i1 = std::min<int64_t>(m, i0 + (e - task));
                ops.index_scores(IndexScoresTask{q, heads, dim, keys, w, out, ldo, i0, i1, kb * kKeyBlock,
                                                 std::min(n, (kb + 1) * kKeyBlock), thread_scratch().attn.data()});
                task += i1 - i0;
            }
        });
}

namespace {

// The queries' records as the ISA routines read them (isa_ops.h fp4_query_head_bytes): doubled values, group biases,
// group scales / 4. Done once per call rather than per key block.
void prepare_fp4_queries(const uint8_t* records, int64_t count, int dim, uint8_t* out, ThreadPool& pool) {
    const size_t record = index_key_record_bytes(dim), head = fp4_query_head_bytes(dim);
    const int groups = dim / 32;
    pool.parallel_for(static_cast<size_t>(count), [&](size_t begin, size_t end, int) {
        for (size_t r = begin; r < end; ++r) {
            const uint8_t* rec = records + r * record;
            uint8_t* o = out + r * head;
            for (int g = 0; g < groups; ++g) {
                int32_t sum = 0;
                for (int d = 32 * g; d < 32 * g + 32; ++d) {
                    const int value = tables::kE2M1Twice.v[(rec[d / 2] >> ((d & 1) * 4)) & 0xf];
                    o[d] = static_cast<uint8_t>(static_cast<int8_t>(value));
                    sum += value;
                }
                const int32_t bias = -tables::kE2M1Bias * sum;
                const float scale = e8m0_to_float(rec[dim / 2 + g]) * 0.25f;  // exact: a power of two (or NaN)
                std::memcpy(o + dim + 4 * g, &bias, 4);
                std::memcpy(o + dim + 4 * groups + 4 * g, &scale, 4);
            }
        }
    });
}

}  // namespace

void index_scores_fp4(const IsaOps& ops, const uint8_t* q_records, int64_t m, int heads, int dim,
                      const uint8_t* const* key_records, int64_t n, const bf16* w, float* out, int64_t ldo,
                      ThreadPool& pool) {
    DI_CHECK_MSG(dim % 32 == 0, "index_scores_fp4: dim {} is not a multiple of 32", dim);
    if (m == 0 || n == 0 || heads == 0) return;
    if (ops.isa == Isa::kAvx512 && amx_enabled()) {
        // Where AMX is granted, index_scores takes its dots on tiles: the records are unpacked for it (not measured
        // against the integer form here: no AMX machine).
        const size_t record = index_key_record_bytes(dim);
        std::vector<const uint8_t*> q_rows(static_cast<size_t>(m) * heads);
        for (size_t r = 0; r < q_rows.size(); ++r) q_rows[r] = q_records + r * record;
        std::vector<bf16> q(q_rows.size() * dim), keys(static_cast<size_t>(n) * dim);
        unpack_records(ops, CacheRecord::kIndexKey, q_rows.data(), m * heads, dim, q.data(), pool);
        unpack_records(ops, CacheRecord::kIndexKey, key_records, n, dim, keys.data(), pool);
        index_scores(ops, q.data(), m, heads, dim, keys.data(), n, w, out, ldo, pool);
        return;
    }
    std::vector<uint8_t> queries(static_cast<size_t>(m) * heads * fp4_query_head_bytes(dim));
    prepare_fp4_queries(q_records, m * heads, dim, queries.data(), pool);
    constexpr int64_t kKeyBlock = 64;
    const int64_t key_blocks = (n + kKeyBlock - 1) / kKeyBlock;
    const int64_t tasks = key_blocks * m;
    for_chunks(
        pool, tasks, std::max<int64_t>(1, tasks / (8 * static_cast<int64_t>(pool.size()))),
        [&](int) { thread_scratch().attn.ensure(index_scores_fp4_scratch_bytes(dim)); },
        [&](int64_t b, int64_t e, int) {
            // key block major, as index_scores: one preparation of the block's keys serves a run of queries
            for (int64_t task = b; task < e;) {
                const int64_t kb = task / m, i0 = task % m;
                const int64_t i1 = std::min<int64_t>(m, i0 + (e - task));
                ops.index_scores_fp4(IndexScoresFp4Task{queries.data(), heads, dim, key_records, w, out, ldo, i0, i1,
                                                        kb * kKeyBlock, std::min(n, (kb + 1) * kKeyBlock),
                                                        thread_scratch().attn.data()});
                task += i1 - i0;
            }
        });
}

}  // namespace deepinfer::backend::cpu
