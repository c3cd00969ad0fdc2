// Scalar packers of the layouts documented in packing.h. They run once per weight at load time (and per
// call for unprepared weights), moving whole column pairs (fp8) or nibble quadruples (fp4) at a time.
#include "backend/cpu/packing.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/check.h"

namespace deepinfer::backend::cpu {

namespace {

uint16_t load16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
// Four nibbles held in the low halves of four bytes -> one 16-bit word (byte 0's nibble lowest).
uint16_t compress_nibbles(uint32_t x) {
    x = (x | (x >> 4)) & 0x00ff00ffu;
    return static_cast<uint16_t>((x | (x >> 8)) & 0xffffu);
}

}  // namespace

void pack_fp8_groups(const Fp8Matrix& w, int64_t g0, int64_t g1, uint8_t* codes_dst, uint8_t* scales_dst) {
    DI_CHECK_MSG(w.cols % 32 == 0, "fp8 weight cols {} not a multiple of 32", w.cols);
    DI_CHECK_MSG(g0 % 2 == 0, "packing starts at odd row group {}", g0);
    const int64_t kb_count = w.cols / 32, scale_cols = (w.cols + 31) / 32, groups = g1 - g0;
    std::memset(codes_dst, 0, static_cast<size_t>(fp8_packed_code_bytes(groups, w.cols)));
    for (int64_t g = g0; g < g1; ++g) {
        const int64_t lg = g - g0;
        const PackedGroup pg = packed_group(lg, groups, kb_count, kFp8BlockBytes, kPackedChunkBytes);
        uint8_t* dst = codes_dst + pg.offset;
        for (int r = 0; r < kGroupRows; ++r) {
            const int64_t row = g * kGroupRows + r;
            if (row >= w.rows) continue;
            const uint8_t* src = w.codes + row * w.cols;
            const int lane = r / 4, d = r % 4;
            // column pair (4c + 2h, 4c + 2h + 1) of this row -> 16-bit word 8 lane + 4 h + d of chunk c
            for (int64_t kb = 0; kb < kb_count; ++kb)
                for (int c = 0; c < 8; ++c)
                    for (int h = 0; h < 2; ++h) {
                        const uint16_t pair = load16(src + kb * 32 + c * 4 + h * 2);
                        std::memcpy(dst + kb * pg.block_stride + c * pg.piece_stride + 2 * (8 * lane + 4 * h + d),
                                    &pair, 2);
                    }
        }
        for (int64_t kb = 0; kb < kb_count; ++kb)
            scales_dst[packed_scale_offset(lg, groups, kb, kb_count, 1)] =
                w.scales[(g * kGroupRows / 32) * scale_cols + kb];
    }
}

void pack_fp4_groups(const Fp4Matrix& w, int64_t g0, int64_t g1, uint8_t* codes_dst, uint8_t* scales_dst) {
    DI_CHECK_MSG(w.cols % 32 == 0, "fp4 weight cols {} not a multiple of 32", w.cols);
    DI_CHECK_MSG(g0 % 2 == 0, "packing starts at odd row group {}", g0);
    const int64_t kb_count = w.cols / 32, row_bytes = w.cols / 2, groups = g1 - g0;
    std::memset(codes_dst, 0, static_cast<size_t>(fp4_packed_code_bytes(groups, w.cols)));
    for (int64_t g = g0; g < g1; ++g) {
        const int64_t lg = g - g0;
        const PackedGroup pg = packed_group(lg, groups, kb_count, kFp4BlockBytes, kPackedChunkBytes);
        uint8_t* dst = codes_dst + pg.offset;
        for (int r = 0; r < kGroupRows; ++r) {
            const int64_t row = g * kGroupRows + r;
            if (row >= w.rows) continue;
            const uint8_t* src = w.packed + row * row_bytes;
            // the 4 bytes of columns 8c..8c+7: even columns (low nibbles) -> word 2r, odd -> word 2r + 1
            for (int64_t kb = 0; kb < kb_count; ++kb)
                for (int c = 0; c < 4; ++c) {
                    const uint32_t u = load32(src + kb * 16 + c * 4);
                    const uint16_t even = compress_nibbles(u & 0x0f0f0f0fu),
                                   odd = compress_nibbles((u >> 4) & 0x0f0f0f0fu);
                    uint8_t* chunk = dst + kb * pg.block_stride + c * pg.piece_stride;
                    std::memcpy(chunk + 4 * r, &even, 2);
                    std::memcpy(chunk + 4 * r + 2, &odd, 2);
                }
        }
        for (int64_t kb = 0; kb < kb_count; ++kb) {
            uint8_t* sdst = scales_dst + packed_scale_offset(lg, groups, kb, kb_count, kGroupRows);
            for (int r = 0; r < kGroupRows; ++r) {
                const int64_t row = g * kGroupRows + r;
                sdst[r] = row < w.rows ? w.scales[row * kb_count + kb] : 127;
            }
        }
    }
}

void prepare_fp8(const Fp8Matrix& w, PackedWeight* out, ThreadPool& pool) {
    const int64_t groups = row_groups(w.rows), kb_count = w.cols / 32;
    const int64_t code_bytes = fp8_packed_code_bytes(groups, w.cols);
    const int64_t scale_bytes = fp8_packed_scale_bytes(groups, w.cols);
    out->layout = PackedLayout::kFp8R16K4;
    out->rows = w.rows;
    out->cols = w.cols;
    // codes, scales, subnormal-block flags
    uint8_t* base = out->allocate(static_cast<size_t>(code_bytes + 2 * scale_bytes));
    // whole pairs per thread (the layout interleaves the two groups of a pair)
    std::atomic<bool> nan_code{false};
    pool.parallel_for(static_cast<size_t>((groups + 1) / 2), [&](size_t p0, size_t p1, int) {
        const int64_t g0 = 2 * static_cast<int64_t>(p0), g1 = std::min(groups, 2 * static_cast<int64_t>(p1));
        uint8_t* codes = base + fp8_packed_code_bytes(g0, w.cols);
        pack_fp8_groups(w, g0, g1, codes, base + code_bytes + fp8_packed_scale_bytes(g0, w.cols));
        // the slab just written, still in cache (padding rows are code 0), block by block: NaN codes anywhere,
        // and each group's block flag (where its scale is, scale_bytes further on): a subnormal code (exponent
        // 0, mantissa != 0) among the block's 512. Loops of fixed length, which the -O2 build vectorizes.
        uint8_t any_nan = 0;
        uint8_t* flags = base + code_bytes + scale_bytes + fp8_packed_scale_bytes(g0, w.cols);
        for (int64_t g = g0; g < g1; ++g) {
            const PackedGroup pg = packed_group(g - g0, g1 - g0, kb_count, kFp8BlockBytes, kPackedChunkBytes);
            for (int64_t kb = 0; kb < kb_count; ++kb) {
                uint8_t sub = 0;
                for (int c = 0; c < 8; ++c) {
                    const uint8_t* chunk = codes + pg.offset + kb * pg.block_stride + c * pg.piece_stride;
                    for (int i = 0; i < kPackedChunkBytes; ++i) {
                        any_nan |= (chunk[i] & 0x7f) == 0x7f;
                        sub |= (chunk[i] & 0x78) == 0 && (chunk[i] & 0x07) != 0;
                    }
                }
                flags[packed_scale_offset(g - g0, g1 - g0, kb, kb_count, 1)] = sub;
            }
        }
        if (any_nan) nan_code = true;
    });
    out->plain_codes = !nan_code;
    out->subnormal_flags = true;
}

void prepare_fp4(const Fp4Matrix& w, PackedWeight* out, ThreadPool& pool) {
    const int64_t groups = row_groups(w.rows);
    const int64_t code_bytes = fp4_packed_code_bytes(groups, w.cols);
    out->layout = PackedLayout::kFp4R16K8;
    out->rows = w.rows;
    out->cols = w.cols;
    uint8_t* base = out->allocate(static_cast<size_t>(code_bytes + fp4_packed_scale_bytes(groups, w.cols)));
    // whole pairs per thread (the layout interleaves the two groups of a pair)
    pool.parallel_for(static_cast<size_t>((groups + 1) / 2), [&](size_t p0, size_t p1, int) {
        const int64_t g0 = 2 * static_cast<int64_t>(p0), g1 = std::min(groups, 2 * static_cast<int64_t>(p1));
        pack_fp4_groups(w, g0, g1, base + fp4_packed_code_bytes(g0, w.cols),
                        base + code_bytes + fp4_packed_scale_bytes(g0, w.cols));
    });
    const uint8_t* scales = w.scales;
    out->plain_scales = std::none_of(scales, scales + w.rows * (w.cols / 32), [](uint8_t b) { return b == 0 || b == 255; });
}

void prepare_bf16_tiles(const Bf16Matrix& w, PackedWeight* out, ThreadPool& pool) {
    const int64_t groups = row_groups(w.rows), kb_count = w.cols / 32;
    out->layout = PackedLayout::kBf16Tiles;
    out->rows = w.rows;
    out->cols = w.cols;
    auto* base = reinterpret_cast<uint32_t*>(out->allocate(static_cast<size_t>(bf16_tiles_bytes(w.rows, w.cols))));
    const auto* src = reinterpret_cast<const uint16_t*>(w.data);
    pool.parallel_for(static_cast<size_t>(groups), [&](size_t g0, size_t g1, int) {
        for (auto g = static_cast<int64_t>(g0); g < static_cast<int64_t>(g1); ++g)
            for (int64_t kb = 0; kb < kb_count; ++kb) {
                uint32_t* tile = base + (g * kb_count + kb) * (kBf16TileBytes / 4);
                for (int64_t r = 0; r < kGroupRows; ++r) {
                    const int64_t row = g * kGroupRows + r;
                    const uint16_t* p = src + row * w.cols + 32 * kb;
                    for (int t = 0; t < 16; ++t)
                        tile[t * 16 + r] = row < w.rows ? static_cast<uint32_t>(p[2 * t]) |
                                                              static_cast<uint32_t>(p[2 * t + 1]) << 16
                                                        : 0u;
                }
            }
    });
}

}  // namespace deepinfer::backend::cpu
