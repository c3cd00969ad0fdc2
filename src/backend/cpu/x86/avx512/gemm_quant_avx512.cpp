// AVX-512 (bf16 dot product + VBMI) block-scaled GEMMs: fp8 x fp8 and fp8 x MXFP4 on the packed layouts
// of backend/cpu/packing.h, and the activation decode they read. Weights are decoded to bf16 in
// registers (64 packed bytes -> 2 or 4 vectors of 16 rows x one column pair). Spec §4.3: each 32-column block product
// is exact (e4m3 and e2m1 values are exact in bf16, their products exact in fp32), summed in fp32 per
// block (vdpbf16ps: order within the block differs from the reference), scaled by sa * sw (powers of two)
// and accumulated over blocks in order with one FMA; one bf16 rounding at the end.
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/avx512/block_decode.h"
#include "backend/cpu/x86/isa_ops.h"
#include "core/scratch_pool.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// kZen4 (both decoders): the plans measured on Zen 4, chosen by zmm_half_rate() (see stream_rows and the prefetch
// notes below).
template <bool kZen4>
struct Fp8Chunks {
    static constexpr int kVectors = 2, kChunks = 8;
    // 5-8 rows: the groups of a pair take turns within each block (see stream_rows)
    static constexpr bool kSideBySideUpTo8 = false;
    static constexpr int64_t kBlockBytes = 512, kScaleBytes = 1;  // a group's block: 16x32 codes, one scale
    // 1-2 rows: on Zen 4 the hardware prefetchers keep up, elsewhere 6 KB into L2; >= 3 rows: near into L1 plus far
    // into L2 (see below)
    template <int R>
    static constexpr Prefetch kPrefetch = R <= 2 ? (kZen4 ? Prefetch{0, 0} : Prefetch{0, 6144}) : Prefetch{1536, 12288};
    static constexpr bool kTwoDecoders = true;
    static constexpr float kBitsCorrection = 0x1p56f;  // 2^120 (weights) x 2^-64 (activations)
    Fp8ToBf16 dec;
    Fp8Bits bits;
    const uint8_t* flags = nullptr;    // the task's subnormal-block flags (indexed as the scales); null: lookups only
    const uint32_t* scaled = nullptr;  // the task's activations x 2^64, [n, k / 2] bf16 pairs
    inline void decode(const uint8_t* p, __m512i* v) const { dec.decode(_mm512_load_si512(p), v[0], v[1]); }
    // Whether a block of `count` groups (1 or a whole pair) whose flags start at f takes the bits.
    static inline bool bits_block(const uint8_t* f, int count) { return count == 2 ? (f[0] | f[1]) == 0 : f[0] == 0; }
};

template <bool kZen4>
struct Fp4Chunks {
    static constexpr int kVectors = 4, kChunks = 4;
    static constexpr bool kSideBySideUpTo8 = !kZen4;
    static constexpr bool kTwoDecoders = false;
    static constexpr int64_t kBlockBytes = 256, kScaleBytes = 16;  // 16x32 codes, a scale per row
    template <int R>
    static constexpr Prefetch kPrefetch = Prefetch{0, 6144};
    Fp4ToBf16 dec;
    inline void decode(const uint8_t* p, __m512i* v) const { dec.decode(p, v); }
};

inline __m512 dot(__m512 acc, __m512i w, const uint32_t* pair) { return dot_bcast(acc, w, pair); }


// Software prefetch of the decode kernels (Chunks::kPrefetch<R>): each line of the pair's stream is requested
// some bytes ahead into L1, L2 or both. The hardware prefetchers alone fall behind once decoding takes a good part
// of the time. Measured in-process A/Bs (bench-ops, streamed): 1-3 KB ahead into L1 gained 15-40% over none at
// n = 4-8 (2 threads); MXFP4, the slowest decode per byte, gained 3-21% at n = 1 at 51-57 GB/s from 6 KB into L2.
// Against those plans (3 KB into L1 for fp8, 6 KB into L2 for MXFP4), with one thread (~28-30 GB/s for one core,
// as much as each core gets when two read 55-60 GB/s) and with two at 33-57 GB/s:
// - fp8, 1-2 rows: no software prefetch 1-10% faster at 55-57 GB/s and with one thread (up to ~4% of that may be
//   those runs' fixed order), equal at ~33 GB/s in runs alternating the order; any L2 prefetch 10-15% slower
//   (the hardware prefetchers keep up with this light a decode).
// - fp8, >= 3 rows: 1.5 KB into L1 plus 12 KB into L2: 3-14% faster with one thread, 6-10% at 53-60 GB/s (n = 4),
//   0-3% slower at ~33 GB/s; 24 KB into L2 alone was as good from 3 rows to 4, worse at 8-16.
// - MXFP4 keeps 6 KB into L2 at every row count: the same 1.5 KB + 12 KB gained 3-7% with one thread but lost
//   2-7% for the grouped experts at ~33 GB/s (three in-process A/Bs).
// Those were Zen 4. On a Zen 5 VM, fp8 with 1-2 rows 6 KB into L2 was 13-17% faster when the machine read ~80
// GB/s (wq_b n = 1 710 -> 617 us, wo_b 714 -> 593, wo_a 532 -> 459), equal at ~46 GB/s, and took the released-dims
// decode step from 1.38-1.39x to 1.26-1.27x its roofline at 78-80 GB/s (three alternating pairs): each core
// must stream ~40 GB/s there, and the hardware prefetchers alone do not keep that many lines in flight. So the
// 1-2-row plan depends on the CPU: zmm_half_rate() tells Zen 4 apart among the CPUs this table runs on (AVX-512
// with bf16: Zen 4 and 5, Intel from Sapphire Rapids on). On an Intel Xeon with AMX (2-vCPU VM; one core reads ~16
// GB/s, two ~32), prefetches one per chunk (prefetch_ahead), fp8 n = 1 with one thread and every block on the
// bit-placing decode (a temporary switch): none 57-62% of the bandwidth, 6 or 12 KB into L2 99-100%, 3 KB 93-97%,
// 1-2 KB into L1 alone 86-88%; so 6 KB into L2 serves it too.

// R (<= 8) activation rows against the G groups of one pair (packing.h; G = 1 for a lone last group), partial
// sums and accumulators in registers, each chunk decoded and used at once, the pair read as one stream. Each
// output's sum runs in one order whatever R is (one chain over the 16 column pairs of a block, then one FMA
// per block), so a row's result does not depend on how many rows come with it (row invariance,
// tests/ops/row_invariance_test.cpp). Up to 4 rows the two groups' chains run side by side
// (they hide the latency of vdpbf16ps); 5-8 rows have chains enough and too few registers for that, so the
// groups take turns within each block (kSideBySide false), still reading the pair's block once -- where
// 512-bit ops run at half rate (Zen 4) and for fp8 everywhere. With full-rate 512-bit units (Zen 5: two
// vdpbf16ps per cycle, ~6 cycles latency) 8 chains leave them idle: MXFP4 runs 5-8 rows side by side there, 16
// chains, some accumulators spilled (Zen 5 in cache, n = 8-64: 73-75% -> 78-81% of the bf16-dot peak; fp8's two
// decoders with them lost a third, and 6-row blocks side by side 5-10%).
template <int R, int G, class Chunks, class Scales>
void stream_rows(const QuantGemmTask& t, const Chunks& chunks, const Scales& scale_of, int64_t g0, int64_t i0) {
    constexpr bool kSideBySide = R <= 4 || Chunks::kSideBySideUpTo8;
    const int64_t kb_count = t.k / 32, a_stride = t.k / 2;
    const float* sa = t.act_scales;
    // the pair's scales and subnormal-block flags, found once (pair_pieces)
    const uint8_t* pair_scales = pair_pieces(t.scales, t, g0, Chunks::kScaleBytes);
    const uint8_t* pair_flags = nullptr;
    if constexpr (Chunks::kTwoDecoders)
        if (chunks.flags) pair_flags = pair_pieces(chunks.flags, t, g0, 1);
    // G = 2 only for a whole pair, G = 1 only for a lone group: the strides are G chunks and G blocks
    const uint8_t* codes =
        t.codes + packed_group(g0, t.groups, kb_count, Chunks::kBlockBytes, kPackedChunkBytes).offset;
    constexpr int64_t kPieceStride = G * kPackedChunkBytes, kBlockStride = G * Chunks::kBlockBytes;
    __m512 acc[G][R];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[g][r] = _mm512_setzero_ps();
    // The block partials of groups [gb, gb + kGroups) (all G side by side, or one) by decoder `dec` against
    // `acts` (for the bits: times Chunks::kBitsCorrection, a power of two, exact), then their scaled accumulation.
    auto run_block = [&]<int kGroups, bool kBits, class Decoder>(int64_t kb, int gb, const Decoder& dec,
                                                                  const uint32_t* acts) {
        __m512 p[kGroups][R];
#pragma GCC unroll 16
        for (int g = 0; g < kGroups; ++g)
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) p[g][r] = _mm512_setzero_ps();
        // The block's codes, prefetches and activation pairs each from one register plus constant offsets:
        // without the barriers GCC keeps one induction pointer per offset, and they spill.
        const uint8_t* block = codes + kb * kBlockStride + gb * kPackedChunkBytes;
        const uint32_t* a_block = acts + kb * 16;
        if constexpr (R <= 4) __asm__("" : "+r"(block), "+r"(a_block));
#pragma GCC unroll 8
        for (int ch = 0; ch < Chunks::kChunks; ++ch) {
            __m512i v[kGroups][Chunks::kVectors];
#pragma GCC unroll 4
            for (int g = 0; g < kGroups; ++g) {
                const uint8_t* chunk = block + ch * kPieceStride + g * kPackedChunkBytes;
                dec.decode(chunk, v[g]);
                prefetch_ahead<Chunks::template kPrefetch<R>>(chunk, v[g][0]);
            }
#pragma GCC unroll 4
            for (int q = 0; q < Chunks::kVectors; ++q) {
                const int tp = Chunks::kVectors * ch + q;
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
                    for (int g = 0; g < kGroups; ++g)  // (5-8 rows: GCC's own addressing was 2-3% faster)
                        p[g][r] = dot(p[g][r], v[g][q], (R <= 4 ? a_block : acts + kb * 16) + r * a_stride + tp);
            }
        }
#pragma GCC unroll 4
        for (int g = 0; g < kGroups; ++g) {
            const __m512 sw = scale_of(pair_scales + (kb * G + gb + g) * Chunks::kScaleBytes);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                __m512 block_sum = p[g][r];
                if constexpr (kBits) block_sum = _mm512_mul_ps(block_sum, _mm512_set1_ps(Chunks::kBitsCorrection));
                const __m512 scale = _mm512_mul_ps(sw, _mm512_set1_ps(sa[r * kb_count + kb]));
                acc[gb + g][r] = _mm512_fmadd_ps(block_sum, scale, acc[gb + g][r]);
            }
        }
    };
    const auto* acts = static_cast<const uint32_t*>(t.acts);
    // groups [gb, gb + kGroups) of block kb, by whichever decoder the block takes
    auto block = [&]<int kGroups>(int64_t kb, int gb) {
        // 5-8 rows (no flags: the driver scales activations for 1-4 only) share each decode among enough dot
        // products, and the lookup's constants fit beside their accumulators only alone.
        if constexpr (Chunks::kTwoDecoders && kSideBySide) {
            if (pair_flags && Chunks::bits_block(pair_flags + kb * G + gb, kGroups)) {
                run_block.template operator()<kGroups, true>(kb, gb, chunks.bits, chunks.scaled + i0 * a_stride);
                return;
            }
        }
        run_block.template operator()<kGroups, false>(kb, gb, chunks, acts);
    };
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        if constexpr (kSideBySide) {
            block.template operator()<G>(kb, 0);
        } else {
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g) block.template operator()<1>(kb, g);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
        const __mmask16 mask = lane_mask(t.rows - (g0 + g) * 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            if (t.out_f32) store_row(t.out_f32 + r * t.ldo + (g0 + g) * 16, mask, acc[g][r]);
            else store_row(t.out + r * t.ldo + (g0 + g) * 16, mask, acc[g][r]);
        }
    }
}

// ---- many activation rows, no AMX: each pair's codes decoded once per chunk of k, then every row over them ----
// The streaming kernel decodes a pair once per 8 activation rows (fp8; MXFP4's integer kernel once per 4, after
// preparing every row's integer form); that left the vdpbf16ps pipes 55-70% busy at n = 16-256 (Zen 5, in
// cache). From kFp8PanelMinRows / kFp4PanelMinRows rows, k is cut in chunks of kQuantPanelBlocks blocks: the
// pair's chunk is decoded once into the scratch (16 KB, L1; MXFP4 by the bf16 decode) and every 8-row block of
// activations multiplies it, the accumulators waiting in the scratch. Each output's sum keeps the streaming
// kernel's order (one chain over the block's 16 column pairs -- fp4_block_chain's for MXFP4, whose integer
// kernel gives the same bits -- one FMA per block, blocks in order): the same bits whatever the row count
// (row invariance). Zen 5, one thread in cache: fp8 n = 64-256 270-318 -> 339-355 GFLOP/s, MXFP4 n = 32-256
// 247-261 -> 373-395.

// R (<= 8) activation rows from i0 against the G groups of the panel (vectors [kb - kb0][16 column pairs][2
// groups]) over blocks [kb0, kb1): 2 R chains side by side (Zen 5 keeps ~12 vdpbf16ps in flight; 8 chains
// left a third of that idle), so the accumulators wait in acc_mem ([n][2][16] floats) from block to block.
// Block kb of group g0 + g has its scales at pair_scales + (kb G + g) kScaleBytes (pair_pieces).
template <int R, int G, int64_t kScaleBytes, class Scales>
inline void panel_rows(const QuantGemmTask& t, const __m512i* panel, int64_t g0, int64_t kb0, int64_t kb1, int64_t i0,
                       float* acc_mem, const uint8_t* pair_scales, const Scales& scale_of) {
    const int64_t kb_count = t.k / 32, a_stride = t.k / 2;
    const auto* acts = static_cast<const uint32_t*>(t.acts) + i0 * a_stride;
    const float* sa = t.act_scales + i0 * kb_count;
    float* am = acc_mem + i0 * 32;
    for (int64_t kb = kb0; kb < kb1; ++kb) {
        __m512 p[G][R];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) p[g][r] = _mm512_setzero_ps();
        // one register per row plus constant offsets (the barriers keep GCC from a pointer per offset, which spill)
        const __m512i* pv = panel + (kb - kb0) * 32;
        const uint32_t* ar[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            ar[r] = acts + r * a_stride + kb * 16;
            __asm__("" : "+r"(ar[r]));
        }
        __asm__("" : "+r"(pv));
#pragma GCC unroll 16
        for (int tp = 0; tp < 16; ++tp) {
            __m512i v[G];
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g) v[g] = _mm512_load_si512(pv + tp * 2 + g);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                // the pair broadcast once into a register for both groups: on Zen 5 (scratch loop of this body, 16
                // chains from L1) 449-467 GFLOP/s against 336-359 with each vdpbf16ps broadcasting from memory
                __m512i pair = _mm512_set1_epi32(static_cast<int>(ar[r][tp]));
                __asm__("" : "+" DEEPINFER_ZMM(pair));  // (else GCC folds it back into the memory operands)
#pragma GCC unroll 2
                for (int g = 0; g < G; ++g) p[g][r] = _mm512_dpbf16_ps(p[g][r], (__m512bh)v[g], (__m512bh)pair);
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            const __m512 sw = scale_of(pair_scales + (kb * G + g) * kScaleBytes);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                float* slot = am + r * 32 + g * 16;
                const __m512 acc = kb == 0 ? _mm512_setzero_ps() : _mm512_load_ps(slot);
                const __m512 scale = _mm512_mul_ps(sw, _mm512_set1_ps(sa[r * kb_count + kb]));
                const __m512 sum = _mm512_fmadd_ps(p[g][r], scale, acc);
                if (kb + 1 < kb_count) {
                    _mm512_store_ps(slot, sum);
                    continue;
                }
                const __mmask16 mask = lane_mask(t.rows - (g0 + g) * 16);
                if (t.out_f32) store_row(t.out_f32 + (i0 + r) * t.ldo + (g0 + g) * 16, mask, sum);
                else store_row(t.out + (i0 + r) * t.ldo + (g0 + g) * 16, mask, sum);
            }
        }
    }
}

// Pair by pair, chunk by chunk of k: decode the chunk (fp8: the lookup decode), then every block of 8 activation
// rows over it. (Zen 4 takes it too, unmeasured there.)
template <class Chunks, class Scales>
void run_panel(const QuantGemmTask& t, const Chunks& chunks, const Scales& scale_of) {
    static_assert(Chunks::kChunks * Chunks::kVectors == 16, "16 column pairs a block");
    const int64_t kb_count = t.k / 32;
    float* base = t.scratch + quant_panel_offset(t.k);
    auto* panel = reinterpret_cast<__m512i*>(base);  // [kQuantPanelBlocks][16][2]
    float* acc_mem = base + kQuantPanelBlocks * 32 * 16;  // [n][2][16]
    for (int64_t g0 = 0; g0 < t.groups; g0 += 2) {
        const int G = g0 + 2 <= t.groups ? 2 : 1;
        const uint8_t* codes =
            t.codes + packed_group(g0, t.groups, kb_count, Chunks::kBlockBytes, kPackedChunkBytes).offset;
        const uint8_t* pair_scales = pair_pieces(t.scales, t, g0, Chunks::kScaleBytes);
        const int64_t piece_stride = G * kPackedChunkBytes, block_stride = G * Chunks::kBlockBytes;
        for (int64_t kb0 = 0; kb0 < kb_count; kb0 += kQuantPanelBlocks) {
            const int64_t kb1 = kb0 + kQuantPanelBlocks < kb_count ? kb0 + kQuantPanelBlocks : kb_count;
            for (int64_t kb = kb0; kb < kb1; ++kb)
                for (int ch = 0; ch < Chunks::kChunks; ++ch)
                    for (int g = 0; g < G; ++g) {
                        const uint8_t* chunk = codes + kb * block_stride + ch * piece_stride + g * kPackedChunkBytes;
                        __m512i v[Chunks::kVectors];
                        chunks.decode(chunk, v);
                        prefetch_ahead<Chunks::template kPrefetch<8>>(chunk, v[0]);
#pragma GCC unroll 4
                        for (int q = 0; q < Chunks::kVectors; ++q)
                            _mm512_store_si512(panel + ((kb - kb0) * 16 + Chunks::kVectors * ch + q) * 2 + g, v[q]);
                    }
            for (int64_t i0 = 0; i0 < t.n; i0 += 8) {
                const int64_t n = t.n - i0 < 8 ? t.n - i0 : 8;
                [&]<int... i>(std::integer_sequence<int, i...>) {
                    constexpr int64_t kS = Chunks::kScaleBytes;
                    ((n == i + 1 ? (G == 2 ? panel_rows<i + 1, 2, kS>(t, panel, g0, kb0, kb1, i0, acc_mem, pair_scales,
                                                                      scale_of)
                                           : panel_rows<i + 1, 1, kS>(t, panel, g0, kb0, kb1, i0, acc_mem, pair_scales,
                                                                      scale_of))
                                 : void()),
                     ...);
                }(std::make_integer_sequence<int, 8>{});
            }
        }
    }
}

// Every row count runs the streaming kernel, in blocks of up to 8 activation rows per pass over a pair: the
// pair (<= 160 KB at k = 5 k) stays in L2 for the next block, so the weight is read from memory once. In
// cache that ran n = 9-64 at 73-82% of the bf16-dot peak, against 52-75% for the L2 panel it replaced (the
// whole group decoded once, then tiles of 8 rows over it: the decoded weights came back from L2 for every
// tile, twice the bytes of the codes).
// f.template operator()<R, G>(g, i0) for each pair of row groups g (G = 2; a lone last group: G = 1) and, within
// it, each block of up to kMaxRows activation rows from i0 (R rows). (The integer MXFP4 GEMM walks the same way.)
template <int kMaxRows, class F>
void each_pair_and_rows(const QuantGemmTask& t, F&& f) {
    for (int64_t g = 0; g < t.groups; g += 2) {
        for (int64_t i0 = 0; i0 < t.n; i0 += kMaxRows) {
            const int64_t n = t.n - i0 < kMaxRows ? t.n - i0 : kMaxRows;
            [&]<int... i>(std::integer_sequence<int, i...>) {
                ((n == i + 1 ? (g + 2 <= t.groups ? f.template operator()<i + 1, 2>(g, i0)
                                                  : f.template operator()<i + 1, 1>(g, i0))
                             : void()),
                 ...);
            }(std::make_integer_sequence<int, kMaxRows>{});
        }
    }
}

// Pair by pair (a lone last group on its own), each pair against every block of 8 activation rows.
template <class Chunks, class Scales>
void run(const QuantGemmTask& t, const Chunks& chunks, const Scales& scale_of) {
    const int64_t kb_count = t.k / 32;
    each_pair_and_rows<8>(t, [&]<int R, int G>(int64_t g, int64_t i0) {
        QuantGemmTask rows = t;  // activation rows [i0, i0 + R) of the task
        rows.n = R;
        rows.acts = static_cast<const uint32_t*>(t.acts) + i0 * (t.k / 2);
        rows.act_scales = t.act_scales + i0 * kb_count;
        if (t.out) rows.out = t.out + i0 * t.ldo;
        if (t.out_f32) rows.out_f32 = t.out_f32 + i0 * t.ldo;
        stream_rows<R, G>(rows, chunks, scale_of, g, i0);
    });
}

// The bf16 decode's partial sums of one block of G groups for R rows (blocks the integer form cannot take):
// p[g][r], the activation rows a_stride pairs apart.
// It issues the block's prefetches, as the integer loop does for its blocks: without them each such block left a
// gap in the stream ahead (Zen 4, expert w2 on SwiGLU rows, 16% of its blocks here at n = 1: one thread 422-439 ->
// 235-242 us, twice the time of w1's same bytes before).
template <int R, int G>
[[gnu::noinline]] void block_bf16(const uint8_t* block, const uint32_t* a_block, int64_t a_stride,
                                  __m512 (&p)[G][R]) {
    const Fp4ToBf16 dec;
#pragma GCC unroll 8
    for (int64_t b = 0; b < G * Fp4Chunks<false>::kBlockBytes; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + b) + Fp4Chunks<false>::kPrefetch<1>.l2, _MM_HINT_T1);
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
        __m512i v[16];
        decode_fp4_block(dec, block + g * kPackedChunkBytes, G * kPackedChunkBytes, v);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) p[g][r] = fp4_block_chain(v, a_block + r * a_stride);
    }
}

// One block of the G groups of a pair against R (<= 4) activation rows in their integer form (Fp4RowLayout, rows
// `row_bytes` apart from `row0`): 64 bytes of codes become 128 biased bytes 2 w + 12 by one shift and two vpermb,
// and meet each row's int8 planes in vpdpbusd, v = 256 hi + lo (kPlanes 2) or 65536 top + 256 hi + lo (kPlanes 3,
// blocks with kFp4SumsExact but not kFp4PlanesExact). The block's integer sums times the row's unit: p[g][r].
template <int R, int G, int kPlanes>
[[gnu::always_inline]] inline void int_block(const uint8_t* block, const uint8_t* row0, int64_t row_bytes,
                                             const Fp4RowLayout& layout, int64_t kb, __m512 (&p)[G][R]) {
    static_assert(kPlanes == 2 || kPlanes == 3);
    constexpr int64_t kPieceStride = G * kPackedChunkBytes;
    auto row = [&](int r) { return row0 + r * row_bytes; };
    // 2 w + 12 by code, repeated in each 16-byte lane: vpermb reads 6 index bits, the nibble plus 2 stray bits
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Biased.v)));
    __m512i lo[G][R], hi[G][R], top[G][R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        const int32_t base = reinterpret_cast<const int32_t*>(row(r) + layout.base)[kb];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            lo[g][r] = _mm512_set1_epi32(base);
            hi[g][r] = top[g][r] = _mm512_setzero_si512();
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            const uint8_t* chunk = block + c * kPieceStride + g * kPackedChunkBytes;
            const __m512i d = _mm512_load_si512(chunk);
            prefetch_ahead<Fp4Chunks<false>::kPrefetch<1>>(chunk, d);
            const __m512i w0 = _mm512_permutexvar_epi8(d, lut);
            const __m512i w1 = _mm512_permutexvar_epi8(_mm512_srli_epi16(d, 4), lut);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const auto* planes = reinterpret_cast<const int32_t*>(row(r) + 64 * kb);
                lo[g][r] = dpbusd_bcast(lo[g][r], w0, planes + 2 * c);
                hi[g][r] = dpbusd_bcast(hi[g][r], w0, planes + 8 + 2 * c);
                lo[g][r] = dpbusd_bcast(lo[g][r], w1, planes + 2 * c + 1);
                hi[g][r] = dpbusd_bcast(hi[g][r], w1, planes + 8 + 2 * c + 1);
                if constexpr (kPlanes == 3) {
                    const auto* tops = reinterpret_cast<const int32_t*>(row(r) + layout.top + 32 * kb);
                    top[g][r] = dpbusd_bcast(top[g][r], w0, tops + 2 * c);
                    top[g][r] = dpbusd_bcast(top[g][r], w1, tops + 2 * c + 1);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        const float unit = reinterpret_cast<const float*>(row(r) + layout.unit)[kb];
        const __m512 u = _mm512_set1_ps(unit * (1.0f / kFp4RowUnitScale));
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            __m512i sum = _mm512_add_epi32(lo[g][r], _mm512_slli_epi32(hi[g][r], 8));
            if constexpr (kPlanes == 3) sum = _mm512_add_epi32(sum, _mm512_slli_epi32(top[g][r], 16));
            p[g][r] = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), u);
        }
    }
}

// The three-plane blocks, out of the two-plane loop's way (it keeps its registers).
template <int R, int G>
[[gnu::noinline]] void block_three_planes(const uint8_t* block, const uint8_t* row0, int64_t row_bytes,
                                          const Fp4RowLayout& layout, int64_t kb, __m512 (&p)[G][R]) {
    int_block<R, G, 3>(block, row0, row_bytes, layout, kb, p);
}

// R (<= 4) activation rows in their integer form (AVX2's prep_plane_row, one row per Fp4RowLayout::bytes) against the G
// groups of one pair, block by block (int_block). One row: 7 vector ops per chunk against the bf16 decode's 11 (3
// shifts, 4 vpermw, 4 vdpbf16ps), which on Zen 5 all share the same two pipes; each further row adds 4 vpdpbusd (64
// products each) where the bf16 decode adds 4 vdpbf16ps (32 products each, and on Intel ~2.3 cycles of both
// vector ports apiece). Each block's integer sum times 2^(e - 11) (the row's unit without its kFp4RowUnitScale)
// is the bf16 decode's exact block partial, scaled the same way after it: the same bits, so row invariance holds
// (gemv_fp4_int_avx2.cpp has the argument). A block that one of the rows' two planes cannot hold runs, for 1-2
// rows, on three planes when their sums are exact there (kFp4SumsExact), else the bf16 decode for all R. Three
// planes take 3 + 6 R vector ops a chunk against the bf16 decode's 7 + 4 R: fewer for one row, as many for two,
// more for 3-4. (The expert w2's SwiGLU rows have 16% of their blocks too wide for two planes. Zen 4, one thread,
// `bench-ops --threads 1 --rows 1 2 3 4 --only "expert w" --per-call 30`, p25: w2 n = 1 / 2 250 / 328 -> 242 / 315
// us; n = 3 / 4 472 / 621 -> 483 / 671 with three planes, so those keep the bf16 decode.) Zen 5, one core in
// cache, n = 1: 58.7 -> ~71 GB/s of codes without the row's preparation (256x4096); streamed at 77-80 GB/s, w1 /
// w2 n = 1 73-74% -> 77-80% of the read bandwidth (alternating runs).
template <int R, int G, bool kPlain>
void gemm_int_rows(const QuantGemmTask& t, int64_t g0, int64_t i0) {
    const int64_t kb_count = t.k / 32, a_stride = t.k / 2;
    const Fp4RowLayout layout = fp4_row_layout(kb_count);
    const uint8_t* row0 = t.fp4_row + i0 * layout.bytes;
    const auto* acts = static_cast<const uint32_t*>(t.acts) + i0 * a_stride;
    const float* sa = t.act_scales + i0 * kb_count;
    constexpr int64_t kBlockBytes = Fp4Chunks<false>::kBlockBytes;
    const uint8_t* codes = t.codes + packed_group(g0, t.groups, kb_count, kBlockBytes, kPackedChunkBytes).offset;
    const uint8_t* scales = pair_pieces(t.scales, t, g0, Fp4Chunks<false>::kScaleBytes);
    constexpr int64_t kBlockStride = G * kBlockBytes;
    __m512 acc[G][R];
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[g][r] = _mm512_setzero_ps();
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        const uint8_t* block = codes + kb * kBlockStride;
        uint8_t flags = kFp4PlanesExact | kFp4SumsExact;
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) flags &= row0[r * layout.bytes + layout.exact + kb];
        __m512 p[G][R];
        if (flags & kFp4PlanesExact) [[likely]] {
            int_block<R, G, 2>(block, row0, layout.bytes, layout, kb, p);
        } else {
            // into an array of its own: p's address taken, GCC kept p on the stack in the two-plane path too
            __m512 q[G][R];
            if (R <= 2 && (flags & kFp4SumsExact)) block_three_planes<R, G>(block, row0, layout.bytes, layout, kb, q);
            else block_bf16<R, G>(block, acts + kb * 16, a_stride, q);
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
                for (int r = 0; r < R; ++r) p[g][r] = q[g][r];
        }
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + kb * G * 16 + g * 16));
            const __m512 sw =
                kPlain ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu8_epi32(b), 23)) : e8m0_to_ps(b);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r)
                acc[g][r] = _mm512_fmadd_ps(p[g][r], _mm512_mul_ps(sw, _mm512_set1_ps(sa[r * kb_count + kb])),
                                            acc[g][r]);
        }
    }
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
        const __mmask16 mask = lane_mask(t.rows - (g0 + g) * 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            if (t.out_f32) store_row(t.out_f32 + (i0 + r) * t.ldo + (g0 + g) * 16, mask, acc[g][r]);
            else store_row(t.out + (i0 + r) * t.ldo + (g0 + g) * 16, mask, acc[g][r]);
        }
    }
}

// Pair by pair, each pair against every block of 4 activation rows.
template <bool kPlain>
void gemm_int(const QuantGemmTask& t) {
    each_pair_and_rows<4>(t, [&]<int R, int G>(int64_t g, int64_t i0) { gemm_int_rows<R, G, kPlain>(t, g, i0); });
}

}  // namespace

// The bit-placing decode's activations: x 2^64 (64 added to every nonzero value's exponent). e4m3 values
// always qualify (|a| <= 448, nonzero |a| >= 2^-9); bf16 rows (gemm_fp8_bf16x) when every value is 0 or
// 2^-54 <= |a| < 2^64. Then a x 2^64 is a finite bf16, every product w a 2^-56 is a multiple of 2^-126 (w a
// multiple of 2^-129, a x 2^64 of 2^3), so no term or partial sum of a block falls below fp32's normal range
// (nor did it unscaled) and none overflows.
int64_t fp8_bits_acts_bytes(int64_t n, int64_t k) { return n * k * 2; }  // bf16 [n, k]

bool fp8_bits_acts(const void* acts, int64_t n, int64_t k, bool e4m3, void* out) {
    if (n > 4) return false;  // the bits serve 1-4 rows (stream_rows)
    const auto* a = static_cast<const uint16_t*>(acts);
    auto* o = static_cast<uint16_t*>(out);
    const __m512i magnitude = _mm512_set1_epi16(0x7fff), step = _mm512_set1_epi16(64 << 7);
    const __m512i lo = _mm512_set1_epi16((127 - 54) << 7), hi = _mm512_set1_epi16((127 + 64) << 7);
    __mmask32 bad = 0;
    for (int64_t i = 0; i < n * k; i += 32) {  // k is a multiple of 32
        const __m512i v = _mm512_loadu_si512(a + i);
        const __m512i m = _mm512_and_si512(v, magnitude);
        const __mmask32 nonzero = _mm512_test_epi16_mask(m, m);
        if (!e4m3) bad |= (_mm512_cmplt_epu16_mask(m, lo) | _mm512_cmpge_epu16_mask(m, hi)) & nonzero;
        _mm512_storeu_si512(o + i, _mm512_mask_add_epi16(v, nonzero, v, step));
    }
    return bad == 0;
}

void gemm_pair_apart(const QuantGemmTask& t, int64_t g0, int G, int64_t block_bytes, int64_t scale_bytes,
                     void (*kernel)(const QuantGemmTask&)) {
    const int64_t kb_count = t.k / 32;
    QuantGemmTask p = t;
    p.codes = t.codes + packed_group(g0, t.groups, kb_count, block_bytes, kPackedChunkBytes).offset;
    p.scales = t.scales + packed_scale_offset(g0, t.groups, 0, kb_count, scale_bytes);
    p.groups = G;
    p.rows = std::min<int64_t>(t.rows - g0 * 16, G * 16);
    if (t.out) p.out = t.out + g0 * 16;
    if (t.out_f32) p.out_f32 = t.out_f32 + g0 * 16;
    p.bits_acts = nullptr;
    p.block_flags = nullptr;
    p.tile_acts = nullptr;
    p.tile_shift = nullptr;
    kernel(p);
}

void gemm_wide_rows_apart(const QuantGemmTask& t, void (*kernel)(const QuantGemmTask&)) {
    ScratchVector<int64_t> rows;
    for (int64_t i = 0; i < t.n; ++i)
        if (t.tile_shift[i] == kWideRow) rows.push_back(i);
    if (rows.empty()) return;
    const auto n = static_cast<int64_t>(rows.size());
    const int64_t kb_count = t.k / 32, width = t.groups * 16;
    const int64_t row_bytes = t.fp4_row ? fp4_row_layout(kb_count).bytes : 0;  // (plane_row_bytes)
    ScratchVector<uint16_t> acts(static_cast<size_t>(n * t.k));
    ScratchVector<float> scales(static_cast<size_t>(n * kb_count)), out_f32;
    ScratchVector<uint8_t> fp4_row(static_cast<size_t>(t.fp4_row ? n * row_bytes + 64 : 0));
    ScratchVector<bf16> out;
    const auto* src = static_cast<const uint16_t*>(t.acts);
    // (the integer form's rows stay 64-byte aligned, as the kernels read them)
    uint8_t* fp4_rows =
        t.fp4_row ? fp4_row.data() + (64 - reinterpret_cast<uintptr_t>(fp4_row.data()) % 64) % 64 : nullptr;
    for (int64_t r = 0; r < n; ++r) {
        std::memcpy(acts.data() + r * t.k, src + rows[r] * t.k, static_cast<size_t>(t.k) * 2);
        std::memcpy(scales.data() + r * kb_count, t.act_scales + rows[r] * kb_count,
                    static_cast<size_t>(kb_count) * sizeof(float));
        if (t.fp4_row)
            std::memcpy(fp4_rows + r * row_bytes, t.fp4_row + rows[r] * row_bytes, static_cast<size_t>(row_bytes));
    }
    QuantGemmTask p = t;
    p.acts = acts.data();
    p.act_scales = scales.data();
    p.n = n;
    p.ldo = width;
    p.fp4_row = t.fp4_row ? fp4_rows : nullptr;
    p.bits_acts = nullptr;
    p.block_flags = nullptr;
    p.tile_acts = nullptr;
    p.tile_shift = nullptr;
    if (t.out_f32) {
        out_f32.resize(static_cast<size_t>(n * width));
        p.out_f32 = out_f32.data();
    } else {
        out.resize(static_cast<size_t>(n * width));
        p.out = out.data();
    }
    kernel(p);
    for (int64_t r = 0; r < n; ++r) {
        const int64_t at = rows[r] * t.ldo;
        if (t.out_f32)
            std::memcpy(t.out_f32 + at, out_f32.data() + r * width, static_cast<size_t>(t.rows) * sizeof(float));
        else std::memcpy(t.out + at, out.data() + r * width, static_cast<size_t>(t.rows) * sizeof(bf16));
    }
}

namespace {
// The fp8 GEMM on vdpbf16ps: CPUs without AMX, and (through gemm_fp8) the rows and pairs gemm_fp8_amx cannot take.
void gemm_fp8_vdpbf16ps(const QuantGemmTask& t) {
    // the block's scale (Fp8Chunks::kScaleBytes at s)
    auto scales = [](const uint8_t* s) { return _mm512_set1_ps(e8m0_to_float(*s)); };
    auto go = [&](auto chunks) {
        // The driver passes flags and scaled activations only for 1-4 rows of weights without NaN codes (a NaN
        // code would decode as a number) whose activations fp8_bits_acts took.
        if (t.block_flags && t.bits_acts) {
            chunks.flags = t.block_flags;
            chunks.scaled = static_cast<const uint32_t*>(t.bits_acts);
        }
        if (t.n >= kFp8PanelMinRows) run_panel(t, chunks, scales);
        else run(t, chunks, scales);
    };
    if (zmm_half_rate()) go(Fp8Chunks<true>{});
    else go(Fp8Chunks<false>{});
}

}  // namespace

// AMX where the driver brought the activations for it (fp8_tile_acts: amx_enabled()). Without them, rows in
// slices of at most kActRowChunk (the vdpbf16ps kernel's most): the AMX kernel's tasks hold up to kTileItemRows rows
// and hand it the rows and pairs outside its window.
void gemm_fp8(const QuantGemmTask& t) {
    if (t.tile_acts) {
        gemm_fp8_amx(t);
        return;
    }
    const int64_t kb_count = t.k / 32;
    for (int64_t r0 = 0; r0 < t.n; r0 += kActRowChunk) {
        QuantGemmTask s = t;
        s.n = std::min(kActRowChunk, t.n - r0);
        s.acts = static_cast<const uint16_t*>(t.acts) + r0 * t.k;
        s.act_scales = t.act_scales + r0 * kb_count;
        if (t.bits_acts) s.bits_acts = static_cast<const uint16_t*>(t.bits_acts) + r0 * t.k;
        if (t.out) s.out = t.out + r0 * t.ldo;
        if (t.out_f32) s.out_f32 = t.out_f32 + r0 * t.ldo;
        gemm_fp8_vdpbf16ps(s);
    }
}

void gemm_fp4(const QuantGemmTask& t) {
    // the block's 16 scales, one per row (Fp4Chunks::kScaleBytes at s)
    auto scales = [](const uint8_t* s) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)); };
    // Codes 1..254 only (no 2^-127, no NaN): the shift alone gives 2^(b - 127), 4 vector ops fewer per block
    // (the decode is issue-bound on Zen 4).
    auto plain = [&](const uint8_t* s) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu8_epi32(scales(s)), 23));
    };
    auto any = [&](const uint8_t* s) { return e8m0_to_ps(scales(s)); };
    // AMX: tiles for 5 and more rows; 1-4 rows keep the integer form. Both give a block the integer form holds
    // its exact sum, and any other block the vdpbf16ps chain of fp4_block_chain (block_decode.h).
    // With the activations of fp4_tile_acts (IsaOps::fp4_tile_acts), the sums over all of k (gemm_fp4_amx_sums.cpp).
    if (amx_enabled() && t.n > kFp4IntegerMaxRows && t.fp4_row) {
        if (t.tile_acts) gemm_fp4_amx_sums(t);
        else gemm_fp4_amx(t);
        return;
    }
    if (t.n >= kFp4PanelMinRows) {
        if (t.plain_scales) run_panel(t, Fp4Chunks<false>{}, plain);
        else run_panel(t, Fp4Chunks<false>{}, any);
        return;
    }
    if (t.fp4_row) {
        if (t.plain_scales) gemm_int<true>(t);
        else gemm_int<false>(t);
        return;
    }
    if (zmm_half_rate()) {
        if (t.plain_scales) run(t, Fp4Chunks<true>{}, plain);
        else run(t, Fp4Chunks<true>{}, any);
    } else {
        if (t.plain_scales) run(t, Fp4Chunks<false>{}, plain);
        else run(t, Fp4Chunks<false>{}, any);
    }
}

int64_t fp4_row_bytes(int64_t k, int64_t n) {
    return n >= kFp4PanelMinRows && !amx_enabled() ? 0 : avx2::plane_row_bytes(k, n);
}

void decode_acts(const uint8_t* codes, const uint8_t* scales, int64_t n, int64_t k, void* values, float* act_scales) {
    const Fp8ToBf16 dec;
    auto* out = static_cast<uint16_t*>(values);
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    const int64_t total = n * k;
    int64_t i = 0;
    for (; i + 64 <= total; i += 64) {
        __m512i a, b;
        dec.decode(_mm512_loadu_si512(codes + i), a, b);
        // unpack order back to element order: lanes (a0 b0 a1 b1) and (a2 b2 a3 b3)
        _mm512_storeu_si512(out + i, _mm512_permutex2var_epi64(a, first, b));
        _mm512_storeu_si512(out + i + 32, _mm512_permutex2var_epi64(a, second, b));
    }
    for (; i < total; ++i) {
        const uint8_t c = codes[i];
        out[i] = static_cast<uint16_t>(((tables::kE4M3Bf16Hi.v[c & 0x7f] | (c & 0x80)) << 8) |
                                       tables::kE4M3Bf16Lo.v[c & 0x7f]);
    }
    for (int64_t j = 0; j < n * (k / 32); ++j) act_scales[j] = e8m0_to_float(scales[j]);
}

}  // namespace deepinfer::backend::cpu::avx512
