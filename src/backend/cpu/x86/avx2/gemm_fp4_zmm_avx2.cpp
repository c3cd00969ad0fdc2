// The EvexVnni form of the AVX2 panel GEMM of MXFP4 on integers (gemm_fp4_int_avx2.cpp has the argument for its
// bits): CPUs with AVX512-VNNI, AVX512BW and VL but no AVX-512 bf16 (Cascade Lake, Ice Lake, Tiger / Rocket Lake),
// which run the AVX2 table. Its functions are built for AVX-512 by their target attributes alone (the file's flags are
// the AVX2 table's; tests/ops/avx2_isa_check.py allows AVX-512 only in functions named with EvexVnni).
//
// Against the ymm forms: tiles of 8 activation rows whose block sums run on zmm (one vpdpwssd for the group's 16
// weight rows), the rows' accumulators in registers, and the next row group decoded into a second panel by the
// current group's first tile, beside its products. (The scaling of a block once for the tile's rows, one key per
// tile and block from tile_scales_of, all forms share.)
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <utility>

#include "backend/cpu/x86/avx2/fp4_panel.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// The EvexVnni form's decode of group g into a panel, block by block: what decode_group does, the codes as whole
// chunks on zmm (Fp4Chunk::to_int8 of both halves at once). gemm_fp4_int_zmm hands it to the first tile of the group
// before, which runs it beside its products: decoded in one pass before its tiles, a group waited on memory with no
// arithmetic to overlap (decode_group: 16% of the GEMM's time at 16 rows, its hottest instructions the code and
// scale loads, with the codes' prefetch into L2 during the tile before). Each block's codes and scales are requested
// kDecodeAhead blocks before their decode.
struct ZmmGroupDecode {
    static constexpr int64_t kDecodeAhead = 8;
    const QuantGemmTask* t;
    Panels pn;
    const uint8_t* codes;   // the group's codes ...
    PackedGroup pg;
    const uint8_t* scales;  // ... and scales (block kb at kb * scale_stride: packed_scale_offset)
    int64_t scale_stride;
    __m512i emin, emax;  // (as decode_group's)

    __attribute__((target("avx512f,avx512bw"), always_inline)) inline void start(EvexVnni, const QuantGemmTask& task,
                                                                               const Panels& panels, int64_t group) {
        t = &task;
        pn = panels;
        pg = packed_group(group, task.groups, task.k / 32, Fp4Chunk::kBlockBytes, kPackedChunkBytes);
        codes = task.codes + pg.offset;
        const PackedGroup ps = packed_group(group, task.groups, task.k / 32, 16, 16);
        scales = task.scales + ps.offset;
        scale_stride = ps.block_stride;
        emin = _mm512_set1_epi32(255);
        emax = _mm512_setzero_si512();
        for (int64_t kb = 0; kb < kDecodeAhead && kb < task.k / 32; ++kb) request(EvexVnni{}, kb);
    }
    __attribute__((target("avx512f,avx512bw"), always_inline)) inline void request(EvexVnni, int64_t kb) const {
#pragma GCC unroll 4
        for (int c = 0; c < Fp4Chunk::kChunks; ++c)
            _mm_prefetch(reinterpret_cast<const char*>(codes + kb * pg.block_stride + c * pg.piece_stride),
                         _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(scales + kb * scale_stride), _MM_HINT_T0);
    }
    __attribute__((target("avx512f,avx512bw"), always_inline)) inline void block(EvexVnni, int64_t kb) {
        const int64_t kb_count = t->k / 32;
        if (kb + kDecodeAhead < kb_count) request(EvexVnni{}, kb + kDecodeAhead);
        const __m512i lut =
            _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Twice.v)));
        const __m512i nib = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
        for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
            const __m512i d = _mm512_loadu_si512(codes + kb * pg.block_stride + c * pg.piece_stride);
            uint8_t* dst = pn.codes + kb * kPanelBlockBytes + c * 128;
            _mm512_store_si512(dst, _mm512_shuffle_epi8(lut, _mm512_and_si512(d, nib)));
            _mm512_store_si512(dst + 64, _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi32(d, 4), nib)));
        }
        // fp4_scales times f, as decode_group
        const uint8_t* sp = scales + kb * scale_stride;
        const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sp)));
        __m512i bits = _mm512_slli_epi32(b, 23);
        // (e8m0_to_ps makes code 255 NaN, and code 0 2^-127, which times f underflows to 0 as the shift's 0 does)
        if (!t->plain_scales)
            bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(255)),
                                         _mm512_set1_epi32(0x7fc00000));
        const __m512 sw = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(Fp4Chunk::kValueScale));
        _mm512_store_ps(pn.sw + kb * 16, sw);
        const __m512i sw_bits = _mm512_castps_si512(sw);
        _mm512_store_si512(pn.sw_exponents + kb * 16, _mm512_sub_epi32(sw_bits, _mm512_set1_epi32(kExponentBias)));
        const __m512i e = _mm512_srli_epi32(sw_bits, 23);
        emin = _mm512_min_epu32(emin, e);
        emax = _mm512_max_epu32(emax, e);
    }
    __attribute__((target("avx512f,avx512bw"), always_inline)) inline ExponentRange range(EvexVnni) const {
        const auto smallest = static_cast<int32_t>(_mm512_reduce_min_epu32(emin));
        const auto largest = static_cast<int32_t>(_mm512_reduce_max_epu32(emax));
        return exponent_range(*t, smallest, largest);
    }
};

// A whole group by ZmmGroupDecode (the task's first).
__attribute__((target("avx512f,avx512bw"), noinline)) ExponentRange decode_group_zmm(EvexVnni, const QuantGemmTask& t,
                                                                                    const Panels& pn, int64_t g) {
    ZmmGroupDecode dec;
    dec.start(EvexVnni{}, t, pn, g);
    for (int64_t kb = 0; kb < t.k / 32; ++kb) dec.block(EvexVnni{}, kb);
    return dec.range(EvexVnni{});
}

// R (1-8) rows' int32 sums of one block on zmm (the EvexVnni form) into s: per pair of columns one vpdpwssd for the
// group's 16 weight rows (a 64-byte panel vector: rows 0-7 and 8-15 side by side), the row's pair taken by embedded
// broadcast from its words. A vpdpwssd waits 4 cycles for its sum and two issue a cycle (Zen 5): 6-8 rows chain
// each row's 16 products (the next block's chains, started from zero, overlap the last ones: as fast as two chains a
// row in a loop of this and the scaling, 7.3-7.4 G vpdpwssd/s, 16 instructions fewer a block); fewer rows sum the
// masked pairs apart and add them at the end. In assembly, the block unrolled: from intrinsics GCC 12 kept register
// copies of the sums and spilled the mask. Row r's words at words + r * stride.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline void block_sums_zmm(
    EvexVnni, const uint8_t* block, const uint8_t* words, int64_t stride, __m512i high, __m512i (&s)[R]) {
    __m512i t[R];  // (the masked pairs' sums where R < 6)
    static_assert(R >= 1 && R <= 8);
    const uint8_t* words3 = words + 3 * stride;  // (rows 3, 5 / 6, 7: no addressing mode takes 3 or 6 * stride)
    const uint8_t* words6 = words + 6 * stride;
    __m512i shifted, masked;
    // Row r's product of its pair at byte `off` of its words with the weights wv into the sum named set r.
#define DZ_DOT(addr, wv, acc) "vpdpwssd " addr "%{1to16%}, " wv ", " acc "\n\t"
#define DZ_ROW0(off, wv, set) DZ_DOT(off "(%[w])", wv, "%[" #set "0]")
#define DZ_ROW1(off, wv, set) DZ_DOT(off "(%[w],%[b])", wv, "%[" #set "1]")
#define DZ_ROW2(off, wv, set) DZ_DOT(off "(%[w],%[b],2)", wv, "%[" #set "2]")
#define DZ_ROW3(off, wv, set) DZ_DOT(off "(%[w3])", wv, "%[" #set "3]")
#define DZ_ROW4(off, wv, set) DZ_DOT(off "(%[w],%[b],4)", wv, "%[" #set "4]")
#define DZ_ROW5(off, wv, set) DZ_DOT(off "(%[w3],%[b],2)", wv, "%[" #set "5]")
#define DZ_ROW6(off, wv, set) DZ_DOT(off "(%[w6])", wv, "%[" #set "6]")
#define DZ_ROW7(off, wv, set) DZ_DOT(off "(%[w6],%[b])", wv, "%[" #set "7]")
#define DZ_ROWS1(off, wv, set) DZ_ROW0(off, wv, set)
#define DZ_ROWS2(off, wv, set) DZ_ROWS1(off, wv, set) DZ_ROW1(off, wv, set)
#define DZ_ROWS3(off, wv, set) DZ_ROWS2(off, wv, set) DZ_ROW2(off, wv, set)
#define DZ_ROWS4(off, wv, set) DZ_ROWS3(off, wv, set) DZ_ROW3(off, wv, set)
#define DZ_ROWS5(off, wv, set) DZ_ROWS4(off, wv, set) DZ_ROW4(off, wv, set)
#define DZ_ROWS6(off, wv, set) DZ_ROWS5(off, wv, set) DZ_ROW5(off, wv, set)
#define DZ_ROWS7(off, wv, set) DZ_ROWS6(off, wv, set) DZ_ROW6(off, wv, set)
#define DZ_ROWS8(off, wv, set) DZ_ROWS7(off, wv, set) DZ_ROW7(off, wv, set)
    // Half a chunk (its low- or high-nibble vector at byte `at` of the block): the shifted pair (the rows' words at
    // byte `even`) into the sums s, the masked one (at `odd`) into the set `set`.
#define DZ_HALF(ROWS, at, even, odd, set)                                                         \
    "vpsllw $8, " at "(%[p]), %[x0]\n\tvpandd " at "(%[p]), %[high], %[x1]\n\t" ROWS(even, "%[x0]", a) \
        ROWS(odd, "%[x1]", set)
    // The block's four chunks, each its low-nibble vector (pairs 4c, 4c + 2) then its high one (4c + 1, 4c + 3).
#define DZ_BLOCK(ROWS, set)                                                                               \
    DZ_HALF(ROWS, "0", "0", "8", set) DZ_HALF(ROWS, "64", "4", "12", set) DZ_HALF(ROWS, "128", "16", "24", set) \
    DZ_HALF(ROWS, "192", "20", "28", set) DZ_HALF(ROWS, "256", "32", "40", set)                           \
    DZ_HALF(ROWS, "320", "36", "44", set) DZ_HALF(ROWS, "384", "48", "56", set)                           \
    DZ_HALF(ROWS, "448", "52", "60", set)
#define DZ_OUT(set, v, r) [set##r] "=&v"(v[r])
#define DZ_OUTS1(set, v) DZ_OUT(set, v, 0)
#define DZ_OUTS2(set, v) DZ_OUTS1(set, v), DZ_OUT(set, v, 1)
#define DZ_OUTS3(set, v) DZ_OUTS2(set, v), DZ_OUT(set, v, 2)
#define DZ_OUTS4(set, v) DZ_OUTS3(set, v), DZ_OUT(set, v, 3)
#define DZ_OUTS5(set, v) DZ_OUTS4(set, v), DZ_OUT(set, v, 4)
#define DZ_OUTS6(set, v) DZ_OUTS5(set, v), DZ_OUT(set, v, 5)
#define DZ_OUTS7(set, v) DZ_OUTS6(set, v), DZ_OUT(set, v, 6)
#define DZ_OUTS8(set, v) DZ_OUTS7(set, v), DZ_OUT(set, v, 7)
#define DZ_UNPAREN(...) __VA_ARGS__
    // The reads of the block and the words are declared by the "memory" clobber (an operand per array would pass
    // asm's limit of 30 operands).
#define DZ_SUMS(ROWS, ZEROS, set, ADDS, outputs)                                                           \
    __asm__(ZEROS DZ_BLOCK(ROWS, set) ADDS                                                                \
            : DZ_UNPAREN outputs, [x0] "=&v"(shifted), [x1] "=&v"(masked)                                 \
            : [p] "r"(block), [w] "r"(words), [w3] "r"(words3), [w6] "r"(words6), [b] "r"(stride), [high] "v"(high) \
            : "memory")
    // (the sums start at zero: "=&" outputs count once against asm's limit of 30 operands, "+" ones twice)
#define DZ_ZERO(r) "vpxord %[a" #r "], %[a" #r "], %[a" #r "]\n\t"
#define DZ_ZERO2(r) DZ_ZERO(r) "vpxord %[b" #r "], %[b" #r "], %[b" #r "]\n\t"
#define DZ_ADD(r) "vpaddd %[b" #r "], %[a" #r "], %[a" #r "]\n\t"
    if constexpr (R == 1) DZ_SUMS(DZ_ROWS1, DZ_ZERO2(0), b, DZ_ADD(0), (DZ_OUTS1(a, s), DZ_OUTS1(b, t)));
    else if constexpr (R == 2)
        DZ_SUMS(DZ_ROWS2, DZ_ZERO2(0) DZ_ZERO2(1), b, DZ_ADD(0) DZ_ADD(1), (DZ_OUTS2(a, s), DZ_OUTS2(b, t)));
    else if constexpr (R == 3)
        DZ_SUMS(DZ_ROWS3, DZ_ZERO2(0) DZ_ZERO2(1) DZ_ZERO2(2), b, DZ_ADD(0) DZ_ADD(1) DZ_ADD(2),
                (DZ_OUTS3(a, s), DZ_OUTS3(b, t)));
    else if constexpr (R == 4)
        DZ_SUMS(DZ_ROWS4, DZ_ZERO2(0) DZ_ZERO2(1) DZ_ZERO2(2) DZ_ZERO2(3), b, DZ_ADD(0) DZ_ADD(1) DZ_ADD(2) DZ_ADD(3),
                (DZ_OUTS4(a, s), DZ_OUTS4(b, t)));
    else if constexpr (R == 5)
        DZ_SUMS(DZ_ROWS5, DZ_ZERO2(0) DZ_ZERO2(1) DZ_ZERO2(2) DZ_ZERO2(3) DZ_ZERO2(4), b,
                DZ_ADD(0) DZ_ADD(1) DZ_ADD(2) DZ_ADD(3) DZ_ADD(4), (DZ_OUTS5(a, s), DZ_OUTS5(b, t)));
    else if constexpr (R == 6)
        DZ_SUMS(DZ_ROWS6, DZ_ZERO(0) DZ_ZERO(1) DZ_ZERO(2) DZ_ZERO(3) DZ_ZERO(4) DZ_ZERO(5), a, "", (DZ_OUTS6(a, s)));
    else if constexpr (R == 7)
        DZ_SUMS(DZ_ROWS7, DZ_ZERO(0) DZ_ZERO(1) DZ_ZERO(2) DZ_ZERO(3) DZ_ZERO(4) DZ_ZERO(5) DZ_ZERO(6), a, "",
                (DZ_OUTS7(a, s)));
    else
        DZ_SUMS(DZ_ROWS8, DZ_ZERO(0) DZ_ZERO(1) DZ_ZERO(2) DZ_ZERO(3) DZ_ZERO(4) DZ_ZERO(5) DZ_ZERO(6) DZ_ZERO(7), a,
                "", (DZ_OUTS8(a, s)));
#undef DZ_ADD
#undef DZ_ZERO2
#undef DZ_ZERO
#undef DZ_SUMS
#undef DZ_UNPAREN
#undef DZ_OUTS8
#undef DZ_OUTS7
#undef DZ_OUTS6
#undef DZ_OUTS5
#undef DZ_OUTS4
#undef DZ_OUTS3
#undef DZ_OUTS2
#undef DZ_OUTS1
#undef DZ_OUT
#undef DZ_BLOCK
#undef DZ_HALF
#undef DZ_ROWS8
#undef DZ_ROWS7
#undef DZ_ROWS6
#undef DZ_ROWS5
#undef DZ_ROWS4
#undef DZ_ROWS3
#undef DZ_ROWS2
#undef DZ_ROWS1
#undef DZ_ROW7
#undef DZ_ROW6
#undef DZ_ROW5
#undef DZ_ROW4
#undef DZ_ROW3
#undef DZ_ROW2
#undef DZ_ROW1
#undef DZ_ROW0
#undef DZ_DOT
}

// joined_sums on zmm for a row whose block has lows (shift 1-3): f, the words' sums as floats, times 2^shift plus the
// lows' products (few pairs), in the same operations per output as joined_sums.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline __m512 with_lows(
    EvexVnni, const uint8_t* row, const Fp4PanelRow& panel, const uint8_t* block, int64_t kb, __m512 f) {
    __m512i l = _mm512_setzero_si512();
    for (uint32_t m = low_pairs(row, panel, kb); m != 0; m &= m - 1) {
        const int q = std::countr_zero(m);
        const int32_t pair = low_pair(row, panel, kb, q);
        // panel_pair's vectors of rows 0-7 and 8-15 side by side
        const __m512i v = _mm512_load_si512(block + q / 4 * 128 + (q % 2) * 64);
        const __m512i w = q % 4 < 2 ? _mm512_slli_epi16(v, 8)
                                    : _mm512_and_si512(v, _mm512_set1_epi16(static_cast<int16_t>(0xff00)));
        l = _mm512_dpwssd_epi32(l, w, _mm512_set1_epi32(pair));
    }
    const __m512 times = _mm512_set1_ps(static_cast<float>(1 << row[panel.shift + kb]));
    return _mm512_fmadd_ps(f, times, _mm512_cvtepi32_ps(l));
}

// The EvexVnni form's tile (CPUs with AVX512-VNNI, AVX512BW and VL: avx2_vnni_encoding() kEvex): up to 8 rows, the
// block's sums on zmm registers (block_sums_zmm). Built for AVX-512 by its target attribute alone (the rest of the
// file stays AVX2; avx2_isa_check.py allows AVX-512 only in functions named with EvexVnni); the sums are the same
// integers, and rows off its fast scaling take finish_row.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), noinline)) void tile_zmm(
    EvexVnni, const QuantGemmTask& t, const Panels& pn, const ExponentRange& range, int64_t g, int64_t i0,
    ZmmGroupDecode* next) {
    const int64_t kb_count = t.k / 32;
    const Fp4PanelRow panel = fp4_panel_row(kb_count);
    const uint8_t* row0 = t.fp4_row + i0 * panel.bytes;
    float* acc = t.scratch;  // [R][16]: the rows' accumulators where finish_row takes them
    __m512 accz[R];          // ... and in registers in between (a store and reload per block made a chain through L1)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) accz[r] = _mm512_setzero_ps();
    const __m512i high = _mm512_set1_epi16(static_cast<int16_t>(0xff00));
    const int64_t tile = i0 / kZmmTileRows;
    const int32_t* su = pn.sa_unit + tile * kb_count * kZmmTileRows;
    const TileKey* keys = pn.tile_keys + tile * kb_count;
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        if (next) next->block(EvexVnni{}, kb);
        __m512i s[R];
        const uint8_t* block = pn.codes + kb * kPanelBlockBytes;
        block_sums_zmm<R>(EvexVnni{}, block, row0 + panel.words + 64 * kb, panel.bytes, high, s);
        const __m512i exponents = _mm512_load_si512(pn.sw_exponents + kb * 16);
        // every row in the exponent range (exponent_scaled) and none running the chain: scale_by_exponents on all 16
        // outputs at once, after joined_sums' lows for the rows that have them
        const TileKey key = keys[kb];
        if (key.lo >= range.lo && key.hi <= range.hi) {
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                __m512 f = _mm512_cvtepi32_ps(s[r]);
                if (key.lows >> r & 1) f = with_lows(EvexVnni{}, row0 + r * panel.bytes, panel, block, kb, f);
                const __m512 y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_set1_epi32(su[kb * kZmmTileRows + r]),
                                                                      exponents));
                accz[r] = _mm512_fmadd_ps(f, y, accz[r]);
            }
            continue;
        }
        // else (a row runs the chain or leaves the range: 3% of the tile-blocks of Gaussian rows) row by row on the
        // halves, as the ymm tiles
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            _mm512_store_ps(acc + 16 * r, accz[r]);
            finish_row(t, pn, range, i0, kb, r, _mm512_castsi512_si256(s[r]), _mm512_extracti64x4_epi64(s[r], 1),
                       acc + 16 * r);
            accz[r] = _mm512_load_ps(acc + 16 * r);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        _mm512_store_ps(acc + 16 * r, accz[r]);
        store_rows(t, g, i0 + r, acc + 16 * r);
    }
}

// The EvexVnni form: tiles of kZmmTileRows rows, the first also decoding the next group (into the other panel).
void tiles_of_group_zmm(EvexVnni, const QuantGemmTask& t, const Panels& pn, const ExponentRange& range, int64_t g,
                        ZmmGroupDecode* next) {
    int64_t i = 0;
    for (; i + kZmmTileRows <= t.n; i += kZmmTileRows, next = nullptr)
        tile_zmm<kZmmTileRows>(EvexVnni{}, t, pn, range, g, i, next);
    [&]<int... r>(std::integer_sequence<int, r...>) {
        ((t.n - i == r + 1 ? tile_zmm<r + 1>(EvexVnni{}, t, pn, range, g, i, next) : void()), ...);
    }(std::make_integer_sequence<int, kZmmTileRows - 1>{});
}

}  // namespace

// The EvexVnni form's GEMM: each group's tiles, the first of them decoding the next group into the other panel.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void gemm_fp4_int_zmm(EvexVnni,
                                                                                 const QuantGemmTask& t) {
    const Panels pn[2] = {panels_of(t, 0), panels_of(t, 1)};
    tile_scales_of(t, pn[0]);
    ExponentRange range = decode_group_zmm(EvexVnni{}, t, pn[0], 0);
    for (int64_t g = 0; g < t.groups; ++g) {
        ZmmGroupDecode next;
        if (g + 1 < t.groups) next.start(EvexVnni{}, t, pn[(g + 1) % 2], g + 1);
        tiles_of_group_zmm(EvexVnni{}, t, pn[g % 2], range, g, g + 1 < t.groups ? &next : nullptr);
        if (g + 1 < t.groups) range = next.range(EvexVnni{});
    }
}

}  // namespace deepinfer::backend::cpu::avx2
