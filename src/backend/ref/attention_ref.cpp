// Scalar reference of sparse sink attention (spec §4.7, kernel K41:296-403 as ported) and of the
// lightning-indexer scores with the reference's bf16 rounding points (spec §5.3.5).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/ref/ref_kernels.h"

namespace deepinfer::backend::ref {

void sparse_attn(const bf16* q, int64_t m, int heads, int dim, const bf16* kv, const int32_t* idx, int topk,
                 const float* sink, float scale, bf16* out, ThreadPool& pool) {
    constexpr int kBlock = 64;  // online softmax block of the kernel
    pool.parallel_for(static_cast<size_t>(m) * heads, [&](size_t begin, size_t end, int) {
        std::vector<float> acc(dim), block_pv(dim), qf(dim), s(kBlock);
        for (size_t row = begin; row < end; ++row) {
            const int64_t i = static_cast<int64_t>(row) / heads;
            const int h = static_cast<int>(row % heads);
            const bf16* qi = q + (i * heads + h) * dim;
            for (int d = 0; d < dim; ++d) qf[d] = bf16_to_float(qi[d]);
            std::fill(acc.begin(), acc.end(), 0.0f);
            float running_max = -1e30f, sum_exp = 0.0f;
            const int32_t* list = idx + i * topk;
            for (int b0 = 0; b0 < topk; b0 += kBlock) {
                const int bn = std::min(kBlock, topk - b0);
                float block_max = -std::numeric_limits<float>::infinity();
                for (int t = 0; t < bn; ++t) {
                    int32_t j = list[b0 + t];
                    if (j < 0) {
                        s[t] = -std::numeric_limits<float>::infinity();
                        continue;
                    }
                    const bf16* kvj = kv + static_cast<int64_t>(j) * dim;
                    float dot = 0.0f;
                    for (int d = 0; d < dim; ++d) dot += qf[d] * bf16_to_float(kvj[d]);
                    s[t] = dot * scale;
                    block_max = std::max(block_max, s[t]);
                }
                float new_max = std::max(running_max, block_max);
                float rescale = std::exp(running_max - new_max);
                float block_sum = 0.0f;
                std::fill(block_pv.begin(), block_pv.end(), 0.0f);
                for (int t = 0; t < bn; ++t) {
                    float p = std::exp(s[t] - new_max);
                    block_sum += p;
                    if (list[b0 + t] < 0) continue;
                    // Probabilities are rounded to bf16 before P.V; the denominator keeps fp32 (spec §4.7).
                    float pb = round_to_bf16(p);
                    const bf16* kvj = kv + static_cast<int64_t>(list[b0 + t]) * dim;
                    for (int d = 0; d < dim; ++d) block_pv[d] += pb * bf16_to_float(kvj[d]);
                }
                for (int d = 0; d < dim; ++d) acc[d] = acc[d] * rescale + block_pv[d];
                sum_exp = sum_exp * rescale + block_sum;
                running_max = new_max;
            }
            sum_exp += std::exp(sink[h] - running_max);  // the sink is not scaled
            bf16* o = out + (i * heads + h) * dim;
            for (int d = 0; d < dim; ++d) o[d] = float_to_bf16(acc[d] / sum_exp);
        }
    });
}

void index_scores(const bf16* q, int64_t m, int heads, int dim, const bf16* keys, int64_t n, const bf16* w,
                  float* out, int64_t ldo, ThreadPool& pool) {
    pool.parallel_for(static_cast<size_t>(m), [&](size_t begin, size_t end, int) {
        for (size_t i = begin; i < end; ++i)
            for (int64_t j = 0; j < n; ++j) {
                float total = 0.0f;
                for (int h = 0; h < heads; ++h) {
                    const bf16* qh = q + (i * heads + h) * dim;
                    float dot = 0.0f;
                    for (int d = 0; d < dim; ++d) dot += bf16_to_float(qh[d]) * bf16_to_float(keys[j * dim + d]);
                    float relu = std::max(round_to_bf16(dot), 0.0f);
                    total += round_to_bf16(relu * bf16_to_float(w[i * heads + h]));
                }
                out[i * ldo + j] = round_to_bf16(total);
            }
    });
}

void index_scores_fp4(const uint8_t* q_records, int64_t m, int heads, int dim, const uint8_t* const* key_records,
                      int64_t n, const bf16* w, float* out, int64_t ldo, ThreadPool& pool) {
    const size_t record = index_key_record_bytes(dim);
    std::vector<bf16> q(static_cast<size_t>(m) * heads * dim), keys(static_cast<size_t>(n) * dim);
    for (int64_t r = 0; r < m * heads; ++r) unpack_index_key_record(q_records + r * record, dim, q.data() + r * dim);
    for (int64_t j = 0; j < n; ++j) unpack_index_key_record(key_records[j], dim, keys.data() + j * dim);
    index_scores(q.data(), m, heads, dim, keys.data(), n, w, out, ldo, pool);
}

}  // namespace deepinfer::backend::ref
