// AVX2 MXFP4 GEMM of 5-64 act_quant rows (3-64 in the EvexVnni form: fp4_panel_rows) on integers, bit-identical to
// the fp32 panel kernel of gemm_quant_avx2.cpp (and so to the scalar reference and to each row alone: row
// invariance). This file: the PlainAvx2 and AvxVnni forms on ymm; the EvexVnni form on zmm: gemm_fp4_zmm_avx2.cpp.
//
// Why: the fp32 panel kernel spends one FMA per 8 products and runs at the FMA ports' rate (57% of their peak
// at n = 16 with its panel decode, where ggml's AVX2 build, on int8 activations, was 4-7% faster). Here each row
// group is decoded once into an L2 panel of int8 weights (2 w), which the tiles widen into int16 pairs of two
// adjacent columns times 256, and each activation row's block integers (QuantGemmTask::fp4_row, Fp4PanelRow in
// fp4_chunk.h) meet them in `vpmaddwd`: 16 products per multiply and one `vpaddd`, which also issues on a third
// port (Intel) or any of four (AMD).
//
// Why the bits do not change (the argument of gemv_fp4_int_avx2.cpp): where 12 * sum |v| < 2^24, every partial
// sum of the fp32 kernel's FMA chain is an integer multiple of 2^(e - 11) of magnitude below 2^24 of them, so
// the chain never rounds and its block partial is the exact integer sum times the row's unit. The words hold v
// when it fits int16; a wider block (its smallest nonzero value 2^12+ times below its largest: 20% of the blocks
// of SwiGLU-like rows, 2% of Gaussian ones) holds v >> shift with the dropped low bits in a second array, whose
// few nonzero pairs are added after the shifted sum. Blocks past the bound or with a NaN code run the chain
// itself, on fp32 columns made from the panel.
//
// With AVX-VNNI (fp4_chunk.h AvxVnni) a row's `vpmaddwd` and `vpaddd` are one vpdpwssd, the same sums.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <cstring>
#include <utility>

#include "backend/cpu/x86/avx2/fp4_panel.h"
#ifdef DEEPINFER_EMULATE_AVX_VNNI
#include "backend/cpu/x86/avx2/emulated_vnni.h"
#endif

namespace deepinfer::backend::cpu::avx2 {
namespace {

// Row group g into the panel: each 32-byte half chunk (8 rows, dword r = row r's 8 codes: low nibbles columns
// 0, 4, 1, 5, high nibbles 2, 6, 3, 7; packing.h) as 2 w in int8 (Fp4Chunk::to_int8), two vectors a half.
// The tiles make the pairs of columns from them: in each int16 of the low-nibble vector, the low byte is column
// 0 (1) and the high byte column 4 (5); a shift left by 8 gives 256 * the first, a mask the second (and the
// same for 2, 3 / 6, 7 of the high-nibble one). A panel of int16 pairs decoded here was twice the bytes to store
// in L2 and to read back per tile of rows, and its decode took 16-21% of the GEMM's time at 16 rows.
ExponentRange decode_group(const QuantGemmTask& t, const Panels& pn, int64_t g) {
    const int64_t kb_count = t.k / 32;
    const PackedGroup pg = packed_group(g, t.groups, kb_count, Fp4Chunk::kBlockBytes, kPackedChunkBytes);
    const uint8_t* codes = t.codes + pg.offset;
    const __m256 f = _mm256_set1_ps(Fp4Chunk::kValueScale);
    const __m256i bias = _mm256_set1_epi32(kExponentBias);
    __m256i emin = _mm256_set1_epi32(255), emax = _mm256_setzero_si256();  // biased exponents of the scales times f
    for (int64_t kb = 0; kb < kb_count; ++kb) {
#pragma GCC unroll 4
        for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
            const uint8_t* piece = codes + kb * pg.block_stride + c * pg.piece_stride;
            auto* dst = reinterpret_cast<__m256i*>(pn.codes + kb * kPanelBlockBytes + c * 128);
            __m256i lo0, hi0, lo1, hi1;
            Fp4Chunk::to_int8(piece, lo0, hi0);
            Fp4Chunk::to_int8(piece + 32, lo1, hi1);
            _mm256_store_si256(dst, lo0);
            _mm256_store_si256(dst + 1, lo1);
            _mm256_store_si256(dst + 2, hi0);
            _mm256_store_si256(dst + 3, hi1);
        }
        __m256 sw0, sw1;
        fp4_scales(t, g, kb, sw0, sw1);
        sw0 = _mm256_mul_ps(sw0, f);
        sw1 = _mm256_mul_ps(sw1, f);
        _mm256_store_ps(pn.sw + kb * 16, sw0);
        _mm256_store_ps(pn.sw + kb * 16 + 8, sw1);
        const __m256i b0 = _mm256_castps_si256(sw0), b1 = _mm256_castps_si256(sw1);
        _mm256_store_si256(reinterpret_cast<__m256i*>(pn.sw_exponents + kb * 16), _mm256_sub_epi32(b0, bias));
        _mm256_store_si256(reinterpret_cast<__m256i*>(pn.sw_exponents + kb * 16 + 8), _mm256_sub_epi32(b1, bias));
        // (biased exponents: 0 for a subnormal product, 255 for an infinite or NaN one; plain_scales: powers of two)
        const __m256i e0 = _mm256_srli_epi32(b0, 23), e1 = _mm256_srli_epi32(b1, 23);
        emin = _mm256_min_epu32(emin, _mm256_min_epu32(e0, e1));
        emax = _mm256_max_epu32(emax, _mm256_max_epu32(e0, e1));
    }
    return exponent_range(t, static_cast<int32_t>(hmin_epu32(emin)), static_cast<int32_t>(hmax_epu32(emax)));
}

// R (1-4; AvxVnni 1-6) rows' int32 sums of one block: s[r][0] / s[r][1] (weight rows 0-7 / 8-15) += the products of its
// 16 pairs of columns (panel_pair, made from `block` in registers) with row r's words at words + r * stride: per row
// and pair a vpmaddwd and a vpaddd each (PlainAvx2) or a vpdpwssd (AvxVnni). In assembly: from intrinsics GCC 12 kept
// two copies of the sums, moving one to the other each pair and storing some to the stack (four rows, AvxVnni: 14
// register moves and 4 stores per 16 vpdpwssd; three rows 14 moves per 12). In cache, one thread: the VNNI form 4-6%
// faster at 16-64 rows, 2-10% at 6-7 and 10-11; the plain form 2-6%.
// A vpdpwssd waits 4 cycles for its sum and two issue a cycle (Zen 5), so the 2 R chains of fewer than three rows
// would leave the unit idle: there the VNNI form sums the masked pairs apart (integers: the same sums in any order).
// (A vpsllw or vpand beside 8 vpdpwssd costs nothing on Zen 5; a vpmovsxbw load, the other way to widen, did.)
// An iteration is a chunk: its low-nibble vectors in ymm0 / ymm1 give pairs 4c (shifted into ymm4 / ymm5) and 4c + 2
// (masked in place), then its high-nibble vectors pairs 4c + 1 and 4c + 3. The macros spell the loop out per row
// count: an asm template must be one string literal.
template <int R, class Form>
__attribute__((always_inline)) inline void block_sums(const uint8_t* block, const uint8_t* words, int64_t stride,
                                                      __m256i (&s)[R][2]) {
    static_assert(R >= 1 && R <= (Form::kVnni ? 6 : 4));
    const uint8_t* words3 = words + 3 * stride;  // (row 3: no addressing mode takes 3 * stride)
    const uint8_t* end = block + kPanelBlockBytes;
    const __m256i high = _mm256_set1_epi16(static_cast<int16_t>(0xff00));
    // One row's products of a pair: x its pair broadcast (from src), w0 / w1 the pair's weights of rows 0-7 / 8-15.
#ifdef DEEPINFER_EMULATE_AVX_VNNI
#define DI_VNNI_ROW(src, x, w0, w1, s0, s1) \
    DEEPINFER_EMULATED_VPDPWSSD(src, x, w0, s0) DEEPINFER_EMULATED_VPDPWSSD(src, x, w1, s1)  // (emulated_vnni.h)
#else
#define DI_VNNI_ROW(src, x, w0, w1, s0, s1) \
    "%{vex%} vpdpwssd " w0 ", " x ", " s0 "\n\t%{vex%} vpdpwssd " w1 ", " x ", " s1 "\n\t"
#endif
#define DI_PLAIN_ROW(src, x, w0, w1, s0, s1)                                                \
    "vpmaddwd " w0 ", " x ", %%ymm3\n\tvpaddd %%ymm3, " s0 ", " s0 "\n\tvpmaddwd " w1 ", " x \
    ", %%ymm3\n\tvpaddd %%ymm3, " s1 ", " s1 "\n\t"
#define DI_CLOBBERS "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "cc", "memory"
    // Row r's broadcast of the pair at src (byte `off` of its words) and its products with w0 / w1 into the sums
    // named set r 0 / set r 1.
#define DI_BROADCAST_ROW(ROW, src, w0, w1, set, r) \
    "vpbroadcastd " src ", %%ymm2\n\t" ROW(src, "%%ymm2", w0, w1, "%[" #set #r "0]", "%[" #set #r "1]")
#define DI_ROW0(ROW, off, w0, w1, set) DI_BROADCAST_ROW(ROW, off "(%[w])", w0, w1, set, 0)
#define DI_ROW1(ROW, off, w0, w1, set) DI_BROADCAST_ROW(ROW, off "(%[w],%[b])", w0, w1, set, 1)
#define DI_ROW2(ROW, off, w0, w1, set) DI_BROADCAST_ROW(ROW, off "(%[w],%[b],2)", w0, w1, set, 2)
#define DI_ROW3(ROW, off, w0, w1, set) DI_BROADCAST_ROW(ROW, off "(%[w3])", w0, w1, set, 3)
#define DI_ROWS1(ROW, off, w0, w1, set) DI_ROW0(ROW, off, w0, w1, set)
#define DI_ROWS2(ROW, off, w0, w1, set) DI_ROWS1(ROW, off, w0, w1, set) DI_ROW1(ROW, off, w0, w1, set)
#define DI_ROWS3(ROW, off, w0, w1, set) DI_ROWS2(ROW, off, w0, w1, set) DI_ROW2(ROW, off, w0, w1, set)
#define DI_ROWS4(ROW, off, w0, w1, set) DI_ROWS3(ROW, off, w0, w1, set) DI_ROW3(ROW, off, w0, w1, set)
#define DI_ROW4(ROW, off, w0, w1, set) DI_BROADCAST_ROW(ROW, off "(%[w],%[b],4)", w0, w1, set, 4)
#define DI_ROW5(ROW, off, w0, w1, set) DI_BROADCAST_ROW(ROW, off "(%[w3],%[b],2)", w0, w1, set, 5)
#define DI_ROWS5(ROW, off, w0, w1, set) DI_ROWS4(ROW, off, w0, w1, set) DI_ROW4(ROW, off, w0, w1, set)
#define DI_ROWS6(ROW, off, w0, w1, set) DI_ROWS5(ROW, off, w0, w1, set) DI_ROW5(ROW, off, w0, w1, set)
    // Half a chunk (its low- or high-nibble vectors at byte `at` of the chunk): the shifted pair (words at byte
    // `even` of the chunk's) into the sums set a, the masked one (at `odd`) into set `set`.
#define DI_HALF(ROWS, ROW, at, even, odd, set)                                                                   \
    "vmovdqa " at "(%[p]), %%ymm0\n\tvmovdqa " at "+32(%[p]), %%ymm1\n\t"                                        \
    "vpsllw $8, %%ymm0, %%ymm4\n\tvpsllw $8, %%ymm1, %%ymm5\n\t" ROWS(ROW, even, "%%ymm4", "%%ymm5", a)          \
    "vpand %[high], %%ymm0, %%ymm0\n\tvpand %[high], %%ymm1, %%ymm1\n\t" ROWS(ROW, odd, "%%ymm0", "%%ymm1", set)
    // 5-6 rows (AvxVnni): 10-12 sums leave four registers, so the pair is widened in place -- shifted after its
    // load, masked by vpand straight from memory -- rather than into copies.
#define DI_HALF_IN_PLACE(ROWS, ROW, at, even, odd, set)                                                          \
    "vmovdqa " at "(%[p]), %%ymm0\n\tvmovdqa " at "+32(%[p]), %%ymm1\n\t"                                        \
    "vpsllw $8, %%ymm0, %%ymm0\n\tvpsllw $8, %%ymm1, %%ymm1\n\t" ROWS(ROW, even, "%%ymm0", "%%ymm1", a)          \
    "vpand " at "(%[p]), %[high], %%ymm0\n\tvpand " at "+32(%[p]), %[high], %%ymm1\n\t"                         \
    ROWS(ROW, odd, "%%ymm0", "%%ymm1", set)
#define DI_OUT(set, v, r) [set##r##0] "+x"(v[r][0]), [set##r##1] "+x"(v[r][1])
#define DI_OUTS1(set, v) DI_OUT(set, v, 0)
#define DI_OUTS2(set, v) DI_OUTS1(set, v), DI_OUT(set, v, 1)
#define DI_OUTS3(set, v) DI_OUTS2(set, v), DI_OUT(set, v, 2)
#define DI_OUTS4(set, v) DI_OUTS3(set, v), DI_OUT(set, v, 3)
#define DI_OUTS5(set, v) DI_OUTS4(set, v), DI_OUT(set, v, 4)
#define DI_OUTS6(set, v) DI_OUTS5(set, v), DI_OUT(set, v, 5)
#define DI_UNPAREN(...) __VA_ARGS__
    // The loop over the block's four chunks. Its reads are declared by the "memory" clobber: an operand per array
    // would pass asm's limit of 30 with two rows' two sets.
#define DI_SUMS_LOOP(ROWS, ROW, set, step3, outputs)                                                                  \
    __asm__("1:\n\t" DI_HALF(ROWS, ROW, "0", "0", "8", set) DI_HALF(ROWS, ROW, "64", "4", "12", set) step3            \
            "add $128, %[p]\n\tadd $16, %[w]\n\tcmp %[end], %[p]\n\tjne 1b"                                           \
            : DI_UNPAREN outputs, [p] "+r"(block), [w] "+r"(words)                                                    \
            : [b] "r"(stride), [end] "r"(end), [high] "x"(high)                                                       \
            : DI_CLOBBERS)
    // (5-6 rows: the block's four chunks spelled out, no loop: 12 sums in and out leave asm's 30 operands no room for
    // a loop's pointers and end)
#define DI_CHUNK_IN_PLACE(ROWS, at0, at1, e0, o0, e1, o1) \
    DI_HALF_IN_PLACE(ROWS, DI_VNNI_ROW, at0, e0, o0, a) DI_HALF_IN_PLACE(ROWS, DI_VNNI_ROW, at1, e1, o1, a)
#define DI_SUMS_IN_PLACE(ROWS, outputs)                                                                              \
    __asm__(DI_CHUNK_IN_PLACE(ROWS, "0", "64", "0", "8", "4", "12")                                                  \
                DI_CHUNK_IN_PLACE(ROWS, "128", "192", "16", "24", "20", "28")                                        \
                    DI_CHUNK_IN_PLACE(ROWS, "256", "320", "32", "40", "36", "44")                                    \
                        DI_CHUNK_IN_PLACE(ROWS, "384", "448", "48", "56", "52", "60")                                \
            : DI_UNPAREN outputs                                                                                      \
            : [p] "r"(block), [w] "r"(words), [w3] "r"(words3), [b] "r"(stride), [high] "x"(high)                    \
            : "ymm0", "ymm1", "ymm2", "memory")
    static_assert(!Form::kEvex, "the EvexVnni form sums on zmm (tile_zmm)");
    if constexpr (Form::kVnni && R < 3) {
        __m256i t[R][2];
        for (int r = 0; r < R; ++r) t[r][0] = t[r][1] = _mm256_setzero_si256();
        if constexpr (R == 1) DI_SUMS_LOOP(DI_ROWS1, DI_VNNI_ROW, b, "", (DI_OUTS1(a, s), DI_OUTS1(b, t)));
        else DI_SUMS_LOOP(DI_ROWS2, DI_VNNI_ROW, b, "", (DI_OUTS2(a, s), DI_OUTS2(b, t)));
        for (int r = 0; r < R; ++r) {
            s[r][0] = _mm256_add_epi32(s[r][0], t[r][0]);
            s[r][1] = _mm256_add_epi32(s[r][1], t[r][1]);
        }
    } else if constexpr (Form::kVnni && R == 3) {
        DI_SUMS_LOOP(DI_ROWS3, DI_VNNI_ROW, a, "", (DI_OUTS3(a, s)));
    } else if constexpr (Form::kVnni && R == 4) {
        DI_SUMS_LOOP(DI_ROWS4, DI_VNNI_ROW, a, "add $16, %[w3]\n\t", (DI_OUTS4(a, s), [w3] "+r"(words3)));
    } else if constexpr (Form::kVnni && R == 5) {
        DI_SUMS_IN_PLACE(DI_ROWS5, (DI_OUTS5(a, s)));
    } else if constexpr (Form::kVnni) {
        DI_SUMS_IN_PLACE(DI_ROWS6, (DI_OUTS6(a, s)));
    } else if constexpr (R == 1) {
        DI_SUMS_LOOP(DI_ROWS1, DI_PLAIN_ROW, a, "", (DI_OUTS1(a, s)));
    } else if constexpr (R == 2) {
        DI_SUMS_LOOP(DI_ROWS2, DI_PLAIN_ROW, a, "", (DI_OUTS2(a, s)));
    } else if constexpr (R == 3) {
        DI_SUMS_LOOP(DI_ROWS3, DI_PLAIN_ROW, a, "", (DI_OUTS3(a, s)));
    } else {
        DI_SUMS_LOOP(DI_ROWS4, DI_PLAIN_ROW, a, "add $16, %[w3]\n\t", (DI_OUTS4(a, s), [w3] "+r"(words3)));
    }
#undef DI_SUMS_IN_PLACE
#undef DI_CHUNK_IN_PLACE
#undef DI_SUMS_LOOP
#undef DI_UNPAREN
#undef DI_OUTS6
#undef DI_OUTS5
#undef DI_OUTS4
#undef DI_OUTS3
#undef DI_OUTS2
#undef DI_OUTS1
#undef DI_OUT
#undef DI_HALF_IN_PLACE
#undef DI_HALF
#undef DI_ROWS6
#undef DI_ROWS5
#undef DI_ROW5
#undef DI_ROW4
#undef DI_ROWS4
#undef DI_ROWS3
#undef DI_ROWS2
#undef DI_ROWS1
#undef DI_ROW3
#undef DI_ROW2
#undef DI_ROW1
#undef DI_ROW0
#undef DI_BROADCAST_ROW
#undef DI_CLOBBERS
#undef DI_PLAIN_ROW
#undef DI_VNNI_ROW
}

// Rows i0 .. i0 + R - 1 over all of k against the decoded group g: per block, int32 sums in registers (16
// pairs of columns, two `vpmaddwd` and two `vpaddd` a row and pair, in block_sums), then each row's
// partial scaled into its accumulators in L1: where the block's key (tile_scales_of, of the 8 rows the tile lies in)
// admits all of them, by scale_by_exponents with the rows' sa_unit side by side -- each row would pass
// exponent_scaled, so these are finish_row's operations -- else row by row (finish_row).
// The first tile of a group also asks for the next group's codes into L2 (NextGroup). Form: PlainAvx2 or AvxVnni.
// Out of line: the form's code stays in functions named with it (tests/ops/avx2_isa_check.py).
template <int R, class Form>
__attribute__((noinline)) void tile(const QuantGemmTask& t, const Panels& pn, const ExponentRange& range, int64_t g,
                                    int64_t i0, const NextGroup& next) {
    const int64_t kb_count = t.k / 32;
    const Fp4PanelRow panel = fp4_panel_row(kb_count);
    const uint8_t* row0 = t.fp4_row + i0 * panel.bytes;
    float* acc = t.scratch;  // [R][16]
    for (int e = 0; e < 16 * R; e += 8) _mm256_store_ps(acc + e, _mm256_setzero_ps());
    // The keys of the one or two tiles of 8 rows (tile_scales_of) this tile's rows lie in, and each row's sa_unit.
    const int first = static_cast<int>(i0 % kZmmTileRows);  // the tile's first row within the first key's 8
    const TileKey* keys0 = pn.tile_keys + i0 / kZmmTileRows * kb_count;
    const TileKey* keys1 = pn.tile_keys + (i0 + R - 1) / kZmmTileRows * kb_count;
    const int32_t* su[R];
    for (int r = 0; r < R; ++r)
        su[r] = pn.sa_unit + (i0 + r) / kZmmTileRows * kb_count * kZmmTileRows + (i0 + r) % kZmmTileRows;
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        __m256i s[R][2];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = _mm256_setzero_si256();
        next.prefetch_block<Fp4Chunk::kChunks>(kb);
        const uint8_t* block = pn.codes + kb * kPanelBlockBytes;
        block_sums<R, Form>(block, row0 + panel.words + 64 * kb, panel.bytes, s);
        TileKey key = keys0[kb];
        if (keys1 != keys0) {
            const TileKey k1 = keys1[kb];
            key = {std::min(key.lo, k1.lo), std::max(key.hi, k1.hi), key.lows | k1.lows << kZmmTileRows, 0};
        }
        if (key.lo >= range.lo && key.hi <= range.hi) {
            const auto* exponents = reinterpret_cast<const __m256i*>(pn.sw_exponents + kb * 16);
            const __m256i e0 = _mm256_load_si256(exponents), e1 = _mm256_load_si256(exponents + 1);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                __m256 f0, f1;
                if (key.lows >> (first + r) & 1) {
                    const uint8_t* row = row0 + r * panel.bytes;
                    joined_sums(row, panel, block, kb, row[panel.shift + kb], s[r][0], s[r][1], f0, f1);
                } else {
                    f0 = _mm256_cvtepi32_ps(s[r][0]);
                    f1 = _mm256_cvtepi32_ps(s[r][1]);
                }
                scale_by_exponents(acc + 16 * r, f0, f1, e0, e1, su[r][kb * kZmmTileRows]);
            }
            continue;
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) finish_row(t, pn, range, i0, kb, r, s[r][0], s[r][1], acc + 16 * r);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) store_rows(t, g, i0 + r, acc + 16 * r);
}

// Tiles of 4 rows: with 6 (the fp32 panel's) GCC spilled half the 12 accumulators, 5 did little better. (So did 6 in
// the VNNI form when its sums were intrinsics: the sums array stayed on the stack, 0.8x the speed of 4.) The AvxVnni
// form's sums loop, in assembly, keeps 6 rows' 12 sums in registers: 12 vpdpwssd chains, where 4 rows' 8 chains
// left the unit idle on an Intel core (a vpdpwssd waits ~5 cycles for its sum there; two issue a cycle).
template <class Form>
inline constexpr int kTileRows = Form::kVnni ? 6 : 4;

template <class Form>
void tiles_of_group(const QuantGemmTask& t, const Panels& pn, const ExponentRange& range, int64_t g,
                    NextGroup next) {
    constexpr int kRows = kTileRows<Form>;
    int64_t i = 0;
    for (; i + kRows <= t.n; i += kRows, next = NextGroup{}) tile<kRows, Form>(t, pn, range, g, i, next);
    // the last 1 .. kRows - 1 rows (as tiles_of_group_zmm)
    [&]<int... r>(std::integer_sequence<int, r...>) {
        ((t.n - i == r + 1 ? tile<r + 1, Form>(t, pn, range, g, i, next) : void()), ...);
    }(std::make_integer_sequence<int, kRows - 1>{});
}

}  // namespace

// Panels::sa_unit and tile_keys for the task's rows, in tiles of kZmmTileRows (a last short tile padded with copies of
// its first row: they pass the checks when it does). Once per task, so that a tile's scaling of a block reads one key
// and its rows' sa_unit side by side rather than three loads and the checks per row (from a row's scattered arrays,
// the pointers spilled: 30% of the EvexVnni form's time at 16 rows on Zen 5; finish_row took 40% of the AvxVnni
// form's tile on an Intel Xeon). The ymm forms' tiles (4 or 6 rows) combine the keys of the one or two 8s they lie in.
void tile_scales_of(const QuantGemmTask& t, const Panels& pn) {
    const int64_t kb_count = t.k / 32;
    const Fp4PanelRow panel = fp4_panel_row(kb_count);
    for (int64_t i0 = 0; i0 < t.n; i0 += kZmmTileRows) {
        const int64_t tile = i0 / kZmmTileRows, rows = std::min<int64_t>(kZmmTileRows, t.n - i0);
        int32_t* su = pn.sa_unit + tile * kb_count * kZmmTileRows;
        TileKey* keys = pn.tile_keys + tile * kb_count;
        for (int64_t kb = 0; kb < kb_count; ++kb) keys[kb] = {INT32_MAX, INT32_MIN, 0, 0};
        for (int r = 0; r < kZmmTileRows; ++r) {
            const int64_t i = i0 + (r < rows ? r : 0);
            const uint8_t* row = t.fp4_row + i * panel.bytes;
            const float* sa = t.act_scales + i * kb_count;
            for (int64_t kb = 0; kb < kb_count; ++kb) {
                int32_t unit;
                std::memcpy(&unit, row + panel.unit + 4 * kb, 4);
                const auto sa_bits = std::bit_cast<uint32_t>(sa[kb]);
                const auto e = static_cast<int32_t>(sa_bits >> 23 & 0xff);
                const uint8_t shift = row[panel.shift + kb];
                su[kb * kZmmTileRows + r] = static_cast<int32_t>(sa_bits + static_cast<uint32_t>(unit));  // (wraps)
                keys[kb].lo = std::min(keys[kb].lo, shift == kChainBlock ? 0 : e);
                keys[kb].hi = std::max(keys[kb].hi, e + (unit >> 23) - 135);
                if (shift != 0 && shift != kChainBlock) keys[kb].lows |= 1 << r;
            }
        }
    }
}

void gemm_fp4_int(const QuantGemmTask& t) {
    with_form([&]<class Form>(Form) {
        if constexpr (Form::kEvex) {
            gemm_fp4_int_zmm(Form{}, t);
        } else {
            const Panels pn = panels_of(t, 0);
            tile_scales_of(t, pn);
            for (int64_t g = 0; g < t.groups; ++g) {
                const ExponentRange range = decode_group(t, pn, g);
                tiles_of_group<Form>(t, pn, range, g, next_group<Fp4Chunk>(t, g));
            }
        }
    });
}

}  // namespace deepinfer::backend::cpu::avx2
