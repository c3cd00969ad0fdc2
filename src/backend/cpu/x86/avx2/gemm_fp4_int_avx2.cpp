// AVX2 MXFP4 GEMM of 5-64 act_quant rows on integers, bit-identical to the fp32 panel kernel of
// gemm_quant_avx2.cpp (and so to the scalar reference and to each row alone: row invariance).
//
// Why: the fp32 panel kernel spends one FMA per 8 products and runs at the FMA ports' rate (57% of their peak
// at n = 16 with its panel decode, where ggml's AVX2 build, on int8 activations, was 4-7% faster). Here each row
// group is decoded once into an L2 panel of int16 pairs (2 w of two adjacent columns) and each activation row's
// block integers (QuantGemmTask::fp4_row, Fp4PanelRow in fp4_chunk.h) meet it in `vpmaddwd`: 16 products per
// multiply and one `vpaddd`, which also issues on a third port (Intel) or any of four (AMD).
//
// Why the bits do not change (the argument of gemv_fp4_int_avx2.cpp): where 12 * sum |v| < 2^24, every partial
// sum of the fp32 kernel's FMA chain is an integer multiple of 2^(e - 11) of magnitude below 2^24 of them, so
// the chain never rounds and its block partial is the exact integer sum times the row's unit. The words hold v
// when it fits int16; a wider block (its smallest nonzero value 2^12+ times below its largest: 20% of the blocks
// of SwiGLU-like rows, 2% of Gaussian ones) holds v >> shift with the dropped low bits in a second array, whose
// few nonzero pairs are added after the shifted sum. Blocks past the bound or with a NaN code run the chain
// itself, on fp32 columns decoded where some row of the task needs them.
//
// With AVX-VNNI (fp4_chunk.h AvxVnni) a row's `vpmaddwd` and `vpaddd` are one vpdpwssd, the same sums.
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/avx2/fp4_chunk.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

// Where the scratch holds the decoded row group (after the kActRowChunk x 16 accumulators).
struct Panels {
    int16_t* pairs;     // [k / 2][16 rows][2]: 2 w of columns 2p and 2p + 1, rows 0-7 then 8-15 (two ymm)
    float* columns;     // [k][16]: fp32 columns as Fp4Chunk decodes them (2^25 w), blocks with needs_chain only
    float* sw;          // [k / 32][16]: the block scales times Fp4Chunk::kValueScale
    uint8_t* needs_chain;  // [k / 32]: some row of the task runs the fp32 chain there (kChainBlock)
};

Panels panels_of(const QuantGemmTask& t) {
    float* base = t.scratch + kActRowChunk * 16;
    Panels p;
    p.pairs = reinterpret_cast<int16_t*>(base);
    p.columns = base + 8 * t.k;
    p.sw = p.columns + 16 * t.k;
    p.needs_chain = reinterpret_cast<uint8_t*>(p.sw + t.k / 2);
    return p;
}

// Row group g into the panels. A 32-byte half chunk (8 rows, dword r = row r's 8 codes: low nibbles columns
// 0, 4, 1, 5, high nibbles 2, 6, 3, 7; packing.h) becomes 2 w as int8 (Fp4Chunk::to_int8); the even bytes of
// the low-nibble result are columns (0, 1), its odd bytes (4, 5), and of the high-nibble result (2, 3) and
// (6, 7): sign-extended in place they are four pair vectors.
void decode_group(const QuantGemmTask& t, const Panels& pn, int64_t g) {
    const int64_t kb_count = t.k / 32;
    const PackedGroup pg = packed_group(g, t.groups, kb_count, Fp4Chunk::kBlockBytes, kPackedChunkBytes);
    const uint8_t* codes = t.codes + pg.offset;
    const __m256 f = _mm256_set1_ps(Fp4Chunk::kValueScale);
    const Fp4Chunk chunk;
    for (int64_t kb = 0; kb < kb_count; ++kb) {
#pragma GCC unroll 1
        for (int c = 0; c < Fp4Chunk::kChunks; ++c) {
            const uint8_t* piece = codes + kb * pg.block_stride + c * pg.piece_stride;
            int16_t* dst = pn.pairs + (kb * 16 + c * 4) * 32;  // pair (kb * 32 + 8 c) / 2, 32 words a pair
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                __m256i lo, hi;
                Fp4Chunk::to_int8(piece + 32 * h, lo, hi);
                auto store = [&](int q, __m256i v) {
                    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32 * q + 16 * h), v);
                };
                store(0, _mm256_srai_epi16(_mm256_slli_epi16(lo, 8), 8));
                store(1, _mm256_srai_epi16(_mm256_slli_epi16(hi, 8), 8));
                store(2, _mm256_srai_epi16(lo, 8));
                store(3, _mm256_srai_epi16(hi, 8));
            }
            if (pn.needs_chain[kb])
                chunk.decode(piece, [&](int j, __m256 col0, __m256 col1) {
                    float* column = pn.columns + (kb * 32 + c * Fp4Chunk::kCols + j) * 16;
                    _mm256_store_ps(column, col0);
                    _mm256_store_ps(column + 8, col1);
                });
        }
        __m256 sw0, sw1;
        fp4_scales(t, g, kb, sw0, sw1);
        _mm256_store_ps(pn.sw + kb * 16, _mm256_mul_ps(sw0, f));
        _mm256_store_ps(pn.sw + kb * 16 + 8, _mm256_mul_ps(sw1, f));
    }
}

// The fp32 panel kernel's block partial for one row (gemm_quant_avx2.cpp panel_tile): FMAs in column order.
__attribute__((noinline)) void chain_block(const float* columns, const float* a, __m256& p0, __m256& p1) {
    p0 = p1 = _mm256_setzero_ps();
    for (int j = 0; j < 32; ++j) {
        const __m256 x = _mm256_broadcast_ss(a + j);
        p0 = _mm256_fmadd_ps(_mm256_load_ps(columns + 16 * j), x, p0);
        p1 = _mm256_fmadd_ps(_mm256_load_ps(columns + 16 * j + 8), x, p1);
    }
}

// Row r's partial of block kb from its int32 sums (s0: rows 0-7, s1: rows 8-15) over the words.
inline void finish_row(const uint8_t* row, const Fp4PanelRow& panel, const Panels& pn, const float* a, int64_t kb,
                       __m256i s0, __m256i s1, __m256& p0, __m256& p1) {
    const uint8_t shift = row[panel.shift + kb];
    if (shift == kChainBlock) return chain_block(pn.columns + kb * 32 * 16, a + kb * 32, p0, p1);
    if (shift != 0) {
        // v = (words << shift) + lows, the lows in few pairs (the small values of a wide block)
        const __m128i count = _mm_cvtsi32_si128(shift);
        s0 = _mm256_sll_epi32(s0, count);
        s1 = _mm256_sll_epi32(s1, count);
        uint16_t lo_pairs;
        std::memcpy(&lo_pairs, row + panel.lo_pairs + 2 * kb, 2);
        for (uint32_t m = lo_pairs; m != 0; m &= m - 1) {
            const int q = std::countr_zero(m);
            int32_t pair;
            std::memcpy(&pair, row + panel.lows + 64 * kb + 4 * q, 4);
            const __m256i x = _mm256_set1_epi32(pair);
            const int16_t* w = pn.pairs + (kb * 16 + q) * 32;
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(w)), x));
            s1 = _mm256_add_epi32(s1,
                                  _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(w + 16)), x));
        }
    }
    float unit;
    std::memcpy(&unit, row + panel.unit + 4 * kb, 4);
    const __m256 u = _mm256_set1_ps(unit);
    p0 = _mm256_mul_ps(_mm256_cvtepi32_ps(s0), u);
    p1 = _mm256_mul_ps(_mm256_cvtepi32_ps(s1), u);
}

// R (1-4) rows' int32 sums of one block: s[r][0] / s[r][1] (weight rows 0-7 / 8-15) += the products of the 16 pairs
// of columns at `pairs` (the block's panel) with row r's words at words + r * stride: per row and pair a vpmaddwd and a
// vpaddd each (PlainAvx2) or a vpdpwssd (AvxVnni). In assembly: from intrinsics GCC 12 kept two copies of the sums,
// moving one to the other each pair and storing some to the stack (four rows, AvxVnni: 14 register moves and 4 stores
// per 16 vpdpwssd; three rows 14 moves per 12). In cache, one thread: the VNNI form 4-6% faster at 16-64 rows, 2-10% at
// 6-7 and 10-11; the plain form 2-6%.
// A vpdpwssd waits 4 cycles for its sum and two issue a cycle (Zen 5), so the 2 R chains of fewer than four rows
// would leave the unit idle: there the VNNI form sums the odd pairs apart (integers: the same sums in any order).
// The macros spell the loop out per row count: an asm template must be one string literal.
template <int R, class Form>
__attribute__((always_inline)) inline void block_sums(const int16_t* pairs, const uint8_t* words, int64_t stride,
                                                      __m256i (&s)[R][2]) {
    static_assert(R >= 1 && R <= 4);
    const uint8_t* words3 = words + 3 * stride;  // (row 3: no addressing mode takes 3 * stride)
    const int16_t* end = pairs + 16 * 32;
    // One row's products of a pair: x its pair broadcast, %%ymm0 / %%ymm1 the pair's weights of rows 0-7 / 8-15.
#define DI_VNNI_ROW(x, s0, s1) "%{vex%} vpdpwssd " x ", %%ymm0, " s0 "\n\t%{vex%} vpdpwssd " x ", %%ymm1, " s1 "\n\t"
#define DI_PLAIN_ROW(x, s0, s1)                                         \
    "vpmaddwd " x ", %%ymm0, %%ymm4\n\tvpmaddwd " x ", %%ymm1, %%ymm5\n\t" \
    "vpaddd %%ymm4, " s0 ", " s0 "\n\tvpaddd %%ymm5, " s1 ", " s1 "\n\t"
#define DI_VNNI_CLOBBERS "ymm0", "ymm1", "ymm2", "ymm3", "cc", "memory"
#define DI_PLAIN_CLOBBERS "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "cc", "memory"
    // A pair's weights (bytes lo / hi of the chunk), then row r's broadcast at byte `off` of its pair and its products
    // into the sums named set r 0 / set r 1.
#define DI_WEIGHTS(lo, hi) "vmovdqa " lo "(%[p]), %%ymm0\n\tvmovdqa " hi "(%[p]), %%ymm1\n\t"
#define DI_ROW0(ROW, off, set) "vpbroadcastd " off "(%[w]), %%ymm2\n\t" ROW("%%ymm2", "%[" #set "00]", "%[" #set "01]")
#define DI_ROW1(ROW, off, set) \
    "vpbroadcastd " off "(%[w],%[b]), %%ymm3\n\t" ROW("%%ymm3", "%[" #set "10]", "%[" #set "11]")
#define DI_ROW2(ROW, off, set) \
    "vpbroadcastd " off "(%[w],%[b],2), %%ymm2\n\t" ROW("%%ymm2", "%[" #set "20]", "%[" #set "21]")
#define DI_ROW3(ROW, off, set) "vpbroadcastd " off "(%[w3]), %%ymm3\n\t" ROW("%%ymm3", "%[" #set "30]", "%[" #set "31]")
#define DI_ROWS1(ROW, off, set) DI_ROW0(ROW, off, set)
#define DI_ROWS2(ROW, off, set) DI_ROWS1(ROW, off, set) DI_ROW1(ROW, off, set)
#define DI_ROWS3(ROW, off, set) DI_ROWS2(ROW, off, set) DI_ROW2(ROW, off, set)
#define DI_ROWS4(ROW, off, set) DI_ROWS3(ROW, off, set) DI_ROW3(ROW, off, set)
#define DI_OUT(set, v, r) [set##r##0] "+x"(v[r][0]), [set##r##1] "+x"(v[r][1])
#define DI_OUTS1(set, v) DI_OUT(set, v, 0)
#define DI_OUTS2(set, v) DI_OUTS1(set, v), DI_OUT(set, v, 1)
#define DI_OUTS3(set, v) DI_OUTS2(set, v), DI_OUT(set, v, 2)
#define DI_OUTS4(set, v) DI_OUTS3(set, v), DI_OUT(set, v, 3)
#define DI_UNPAREN(...) __VA_ARGS__
    // The loop over the block's pairs (pair_bytes of the panel and word_bytes of each row an iteration). Its reads are
    // declared by the "memory" clobber: an operand per array would pass asm's limit of 30 with three rows' two sets.
#define DI_SUMS_LOOP(body, pair_bytes, word_bytes, outputs, ...)                                                  \
    __asm__("1:\n\t" body "add $" pair_bytes ", %[p]\n\tadd $" word_bytes ", %[w]\n\tcmp %[end], %[p]\n\tjne 1b" \
            : DI_UNPAREN outputs, [p] "+r"(pairs), [w] "+r"(words)                                                \
            : [b] "r"(stride), [end] "r"(end)                                                                     \
            : __VA_ARGS__)
    // Four rows: one pair an iteration into the sums s (a), stepping row 3's pointer too.
#define DI_ONE_SET4(ROW, ...)                                                                                      \
    DI_SUMS_LOOP(DI_WEIGHTS("", "32") DI_ROWS4(ROW, "", a) "add $4, %[w3]\n\t", "64", "4",                        \
                 (DI_OUTS4(a, s), [w3] "+r"(words3)), __VA_ARGS__)
    // Two pairs an iteration, the odd one into the sums t (b).
#define DI_TWO_SETS(ROWS, OUTS)                                                                                   \
    DI_SUMS_LOOP(DI_WEIGHTS("", "32") ROWS(DI_VNNI_ROW, "", a) DI_WEIGHTS("64", "96") ROWS(DI_VNNI_ROW, "4", b), \
                 "128", "8", (OUTS(a, s), OUTS(b, t)), DI_VNNI_CLOBBERS)
    // Plain, fewer than four rows: two pairs an iteration into the same sums (whose vpaddd chains wait one cycle).
#define DI_TWO_PAIRS(ROWS, OUTS)                                                                                      \
    DI_SUMS_LOOP(DI_WEIGHTS("", "32") ROWS(DI_PLAIN_ROW, "", a) DI_WEIGHTS("64", "96") ROWS(DI_PLAIN_ROW, "4", a), \
                 "128", "8", (OUTS(a, s)), DI_PLAIN_CLOBBERS)
    if constexpr (Form::kVnni && R < 4) {
        __m256i t[R][2];
        for (int r = 0; r < R; ++r) t[r][0] = t[r][1] = _mm256_setzero_si256();
        if constexpr (R == 1) DI_TWO_SETS(DI_ROWS1, DI_OUTS1);
        else if constexpr (R == 2) DI_TWO_SETS(DI_ROWS2, DI_OUTS2);
        else DI_TWO_SETS(DI_ROWS3, DI_OUTS3);
        for (int r = 0; r < R; ++r) {
            s[r][0] = _mm256_add_epi32(s[r][0], t[r][0]);
            s[r][1] = _mm256_add_epi32(s[r][1], t[r][1]);
        }
    } else if constexpr (Form::kVnni) {
        DI_ONE_SET4(DI_VNNI_ROW, DI_VNNI_CLOBBERS);
    } else if constexpr (R == 1) {
        DI_TWO_PAIRS(DI_ROWS1, DI_OUTS1);
    } else if constexpr (R == 2) {
        DI_TWO_PAIRS(DI_ROWS2, DI_OUTS2);
    } else if constexpr (R == 3) {
        DI_TWO_PAIRS(DI_ROWS3, DI_OUTS3);
    } else {
        DI_ONE_SET4(DI_PLAIN_ROW, DI_PLAIN_CLOBBERS);
    }
#undef DI_TWO_PAIRS
#undef DI_TWO_SETS
#undef DI_ONE_SET4
#undef DI_SUMS_LOOP
#undef DI_UNPAREN
#undef DI_OUTS4
#undef DI_OUTS3
#undef DI_OUTS2
#undef DI_OUTS1
#undef DI_OUT
#undef DI_ROWS4
#undef DI_ROWS3
#undef DI_ROWS2
#undef DI_ROWS1
#undef DI_ROW3
#undef DI_ROW2
#undef DI_ROW1
#undef DI_ROW0
#undef DI_WEIGHTS
#undef DI_PLAIN_CLOBBERS
#undef DI_VNNI_CLOBBERS
#undef DI_PLAIN_ROW
#undef DI_VNNI_ROW
}

// Rows i0 .. i0 + R - 1 over all of k against the decoded group g: per block, int32 sums in registers (16
// pairs of columns, two `vpmaddwd` and two `vpaddd` a row and pair, in block_sums), then each row's
// partial scaled into its accumulators in L1.
// The first tile of a group also asks for the next group's codes into L2 (NextGroup). Form: PlainAvx2 or AvxVnni.
// Out of line: the form's code stays in functions named with it (tests/ops/avx2_isa_check.py).
template <int R, class Form>
__attribute__((noinline)) void tile(const QuantGemmTask& t, const Panels& pn, int64_t g, int64_t i0,
                                    const NextGroup& next) {
    const int64_t kb_count = t.k / 32;
    const Fp4PanelRow panel = fp4_panel_row(kb_count);
    const uint8_t* row0 = t.fp4_row + i0 * panel.bytes;
    const float* a = static_cast<const float*>(t.acts) + i0 * t.k;
    float* acc = t.scratch;  // [R][16]
    for (int e = 0; e < 16 * R; e += 8) _mm256_store_ps(acc + e, _mm256_setzero_ps());
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        __m256i s[R][2];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = _mm256_setzero_si256();
        next.prefetch_block<Fp4Chunk::kChunks>(kb);
        const int16_t* pairs = pn.pairs + kb * 16 * 32;
        const uint8_t* words = row0 + panel.words + 64 * kb;
        block_sums<R, Form>(pairs, words, panel.bytes, s);
        const __m256 sw0 = _mm256_load_ps(pn.sw + kb * 16), sw1 = _mm256_load_ps(pn.sw + kb * 16 + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            __m256 p0, p1;
            finish_row(row0 + r * panel.bytes, panel, pn, a + r * t.k, kb, s[r][0], s[r][1], p0, p1);
            scale_into(acc + 16 * r, p0, p1, sw0, sw1, t.act_scales[(i0 + r) * kb_count + kb]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) store_rows(t, g, i0 + r, acc + 16 * r);
}

// Tiles of 4 rows: with 6 (the fp32 panel's) GCC spilled half the 12 accumulators, 5 did little better. (So did 6 in
// the VNNI form, whose products need no temporaries: the sums array stayed on the stack, 0.8x the speed of 4.)
constexpr int kTileRows = 4;

template <class Form>
void tiles_of_group(const QuantGemmTask& t, const Panels& pn, int64_t g, NextGroup next) {
    int64_t i = 0;
    for (; i + kTileRows <= t.n; i += kTileRows, next = NextGroup{}) tile<kTileRows, Form>(t, pn, g, i, next);
    switch (t.n - i) {
        case 3: tile<3, Form>(t, pn, g, i, next); break;
        case 2: tile<2, Form>(t, pn, g, i, next); break;
        case 1: tile<1, Form>(t, pn, g, i, next); break;
        default: break;
    }
}

}  // namespace

void gemm_fp4_int(const QuantGemmTask& t) {
    const int64_t kb_count = t.k / 32;
    const Fp4PanelRow panel = fp4_panel_row(kb_count);
    const Panels pn = panels_of(t);
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        bool chain = false;
        for (int64_t i = 0; i < t.n; ++i) chain |= t.fp4_row[i * panel.bytes + panel.shift + kb] == kChainBlock;
        pn.needs_chain[kb] = chain;
    }
    with_form([&]<class Form>(Form) {
        for (int64_t g = 0; g < t.groups; ++g) {
            decode_group(t, pn, g);
            tiles_of_group<Form>(t, pn, g, next_group<Fp4Chunk>(t, g));
        }
    });
}

}  // namespace deepinfer::backend::cpu::avx2
