// Scalar packers of the layouts documented in packing.h. They run once per weight at load time (and per
// call for unprepared weights), so they favour obvious index arithmetic over speed.
#include "backend/cpu/packing.h"

#include <cstring>

#include "core/check.h"

namespace deepinfer::backend::cpu {

void pack_fp8_groups(const Fp8Matrix& w, int64_t g0, int64_t g1, uint8_t* codes_dst, uint8_t* scales_dst) {
    DI_CHECK_MSG(w.cols % 32 == 0, "fp8 weight cols {} not a multiple of 32", w.cols);
    const int64_t kb_count = w.cols / 32, scale_cols = (w.cols + 31) / 32;
    for (int64_t g = g0; g < g1; ++g) {
        uint8_t* dst = codes_dst + (g - g0) * kGroupRows * w.cols;
        for (int r = 0; r < kGroupRows; ++r) {
            const int64_t row = g * kGroupRows + r;
            const int lane = r / 4, d = r % 4;
            for (int64_t kb = 0; kb < kb_count; ++kb)
                for (int c = 0; c < 8; ++c)
                    for (int h = 0; h < 2; ++h)
                        for (int e = 0; e < 2; ++e) {
                            const int64_t col = kb * 32 + c * 4 + h * 2 + e;
                            dst[kb * kFp8BlockBytes + c * 64 + 16 * lane + 8 * h + 2 * d + e] =
                                row < w.rows ? w.codes[row * w.cols + col] : 0;
                        }
        }
        for (int64_t kb = 0; kb < kb_count; ++kb)
            scales_dst[(g - g0) * kb_count + kb] = w.scales[(g * kGroupRows / 32) * scale_cols + kb];
    }
}

void pack_fp4_groups(const Fp4Matrix& w, int64_t g0, int64_t g1, uint8_t* codes_dst, uint8_t* scales_dst) {
    DI_CHECK_MSG(w.cols % 32 == 0, "fp4 weight cols {} not a multiple of 32", w.cols);
    const int64_t kb_count = w.cols / 32, row_bytes = w.cols / 2;
    for (int64_t g = g0; g < g1; ++g) {
        uint8_t* dst = codes_dst + (g - g0) * kGroupRows * row_bytes;
        std::memset(dst, 0, kGroupRows * row_bytes);
        for (int r = 0; r < kGroupRows; ++r) {
            const int64_t row = g * kGroupRows + r;
            if (row >= w.rows) continue;
            const uint8_t* src = w.packed + row * row_bytes;
            for (int64_t kb = 0; kb < kb_count; ++kb)
                for (int c = 0; c < 4; ++c)
                    for (int q = 0; q < 4; ++q)
                        for (int e = 0; e < 2; ++e) {
                            const int64_t col = kb * 32 + c * 8 + q * 2 + e;
                            const uint8_t code = (src[col / 2] >> ((col & 1) * 4)) & 0xf;
                            const int64_t byte = kb * kFp4BlockBytes + c * 64 + 2 * (2 * r + e) + (q >> 1);
                            dst[byte] |= static_cast<uint8_t>(code << ((q & 1) * 4));
                        }
        }
        uint8_t* sdst = scales_dst + (g - g0) * kGroupRows * kb_count;
        for (int64_t kb = 0; kb < kb_count; ++kb)
            for (int r = 0; r < kGroupRows; ++r) {
                const int64_t row = g * kGroupRows + r;
                sdst[kb * kGroupRows + r] = row < w.rows ? w.scales[row * kb_count + kb] : 127;
            }
    }
}

void prepare_fp8(const Fp8Matrix& w, PackedWeight* out, ThreadPool& pool) {
    const int64_t groups = row_groups(w.rows);
    const int64_t code_bytes = fp8_packed_code_bytes(groups, w.cols);
    out->layout = PackedLayout::kFp8R16K4;
    out->rows = w.rows;
    out->cols = w.cols;
    out->data.allocate(static_cast<size_t>(code_bytes + fp8_packed_scale_bytes(groups, w.cols)));
    uint8_t* base = out->data.data();
    pool.parallel_for(static_cast<size_t>(groups), [&](size_t g0, size_t g1, int) {
        pack_fp8_groups(w, g0, g1, base + fp8_packed_code_bytes(g0, w.cols),
                        base + code_bytes + fp8_packed_scale_bytes(g0, w.cols));
    });
}

void prepare_fp4(const Fp4Matrix& w, PackedWeight* out, ThreadPool& pool) {
    const int64_t groups = row_groups(w.rows);
    const int64_t code_bytes = fp4_packed_code_bytes(groups, w.cols);
    out->layout = PackedLayout::kFp4R16K8;
    out->rows = w.rows;
    out->cols = w.cols;
    out->data.allocate(static_cast<size_t>(code_bytes + fp4_packed_scale_bytes(groups, w.cols)));
    uint8_t* base = out->data.data();
    pool.parallel_for(static_cast<size_t>(groups), [&](size_t g0, size_t g1, int) {
        pack_fp4_groups(w, g0, g1, base + fp4_packed_code_bytes(g0, w.cols),
                        base + code_bytes + fp4_packed_scale_bytes(g0, w.cols));
    });
}

}  // namespace deepinfer::backend::cpu
