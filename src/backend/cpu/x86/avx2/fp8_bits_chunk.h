// The AVX2 bit-placing fp8 decode (gemm_quant_avx2.cpp, gemv_fp8_bits_avx2.cpp): e4m3 codes of the packed
// layout (backend/cpu/packing.h) to fp32 columns by moving the code's bits into place. AVX2 translation units only.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/isa_ops.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu::avx2 {

// f(j, rows 0-7, rows 8-15) for the 4 columns of the 64-byte chunk at p by the decode D (below: D::split of a half
// chunk, D::column of the split), in column order; each column made just before its use, which keeps the registers
// of a 3-4-row stream free (all 8 at once spilled there). The 2-4-row stream's decode (gemm_quant_avx2.cpp) where ymm
// ops run at full width, and Fp8BitsPanel's; Fp8BitsHalfRate's stream takes the half chunks one by one instead.
template <class D, class F>
inline void decode_columns(const uint8_t* p, const F& f) {
    const typename D::Split a = D::split(p);
    const typename D::Split b = D::split(p + 32);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) f(j, D::column(a, j), D::column(b, j));
}

// e4m3 -> fp32 by placing the code's bits, for weights without NaN codes (PackedWeight::plain_codes): the sign
// at bit 31 and the 7 magnitude bits at 20..26 are the fp32 bits of value * 2^-120, subnormal codes included (as
// fp32 subnormals, exactly; so not under DAZ). The activations come scaled by 2^119 (kActScale; 448 * 2^119 is
// finite), so each FMA adds w * a / 2 exactly (e4m3 products are >= 2^-18: no subnormals) and the chain is the
// reference's scaled by 1/2, bit for bit (the block scale 2^(s_w + s_a + 1) then stands for the F16C path's
// 2^(s_w + s_a + 8): the same unless that underflows). e4m3 activations always qualify, bf16 rows when
// fp8_bits_acts finds them in range. Multiplying the columns by 2^120 instead of scaling the activations halved
// the speed (Zen 4 is slow on multiplies of the subnormal weights, not on FMAs).
struct Fp8BitsChunk {
    static constexpr int kCols = 4, kChunks = 8;
    static constexpr int64_t kBlockBytes = 512, kScaleBytes = 1;  // a group's block: 16x32 codes, one scale
    static constexpr float kValueScale = 2.0f;
    static constexpr float kActScale = 0x1p119f;
    static constexpr bool kBroadcastActs = false;  // the stream's activation rows [n, k] (fp8_bits_acts)

    // 32 bytes (a half chunk: 8 rows x 4 columns) -> col[j], rows 0-7 of column j. One byte shuffle gathers
    // each row's 4 codes into its dword (columns 0, 1 in the low word, 2, 3 in the high word; packing.h puts
    // row d of a lane's 4 at bytes 8 (j / 2) + 2 d + j % 2). Each word's top byte -- columns 3 and 1 -- times
    // 16 as a signed byte (vpmaddubsw with the byte pair (0, 16)) is that code at bits 4..11 of its word, the sign
    // copied above; the pair (16, 0) does it for the low bytes, columns 2 and 0. The high words are in place
    // (bits 20..27, sign at 31); the low words move up with a 32-bit shift by 16. A mask keeps bits 31 and 20..26.
    // Why: the 4 shuffles and 4 shifts of one shuffle per column were the kernel's cost on Zen 3 (its vector
    // pipes, not memory: a scratch replica of the GEMV ran 11.6 -> 9.5 TSC cycles per 64-byte chunk). Zen 3 runs
    // shuffles and shifts on two pipes, one of them shared with the FMAs, and integer multiplies on two others
    // (one shared with the FMAs): the multiplies take three shift-pipe operations per half chunk off the
    // contended pair (the 16-bit shifts by 4, 8 and 4 they replace give the same bits where the mask keeps
    // them); the one-row GEMV in L2 went 8.3 -> 7.3 TSC cycles per 64 B (minimum of 40 rounds, in process).
    struct Split {
        __m256i odd, even;  // columns 1 (low words), 3 (high) | 0, 2, each code at bits 4..11 of its word
    };
    static inline Split split(const uint8_t* q) {  // the half chunk at q
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        const __m256i rows = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1, 8, 9, 2, 3,
                                              10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
        const __m256i r = _mm256_shuffle_epi8(v, rows);
        const __m256i top_byte_x16 = _mm256_set1_epi16(0x1000), low_byte_x16 = _mm256_set1_epi16(0x0010);
        return {_mm256_maddubs_epi16(top_byte_x16, r), _mm256_maddubs_epi16(low_byte_x16, r)};
    }
    static inline __m256 column(const Split& s, int j) {
        const __m256i keep = _mm256_set1_epi32(static_cast<int>(0x87f00000u));
        const __m256i v = j % 2 ? s.odd : s.even;
        return _mm256_castsi256_ps(_mm256_and_si256(j < 2 ? _mm256_slli_epi32(v, 16) : v, keep));
    }
    template <class F>
    inline void decode(const uint8_t* p, const F& f) const {
        decode_columns<Fp8BitsChunk>(p, f);
    }
};

// The same columns, bit for bit, on CPUs that issue each ymm operation as two 128-bit halves (AMD Zen 1 / Zen+,
// Hygon Dhyana: core/cpu_features.h ymm_half_rate): there vpmaddubsw runs on one pipe, shared with the FMAs, at one
// ymm per two cycles, and the FMAs leave room for about one other ymm operation a cycle. Here each code's word comes
// from a 16-bit arithmetic shift of the word whose top byte it is -- the odd bytes (columns 1, 3) in place, the even
// ones (columns 0, 2) from a second load one byte earlier -- so that the shift copies its sign above it; one mask per
// 16 codes keeps bit 15 and 4..10 (the low byte, whatever it held, is dropped), and an unpack with zero moves each
// word to the top of its dword. 8 vector operations per half chunk, none of them a multiply, against the form above's
// 9 with two. On Zen 1 (EPYC 7001, 2 vCPUs): a scratch replica of the one-row GEMV's loop (registers only) 11.3 ->
// 10.5 core cycles per 32 codes; the GEMV streamed by two threads (`bench-ops --rows 1 --only fp`, the two decodes
// alternating by DEEPINFER_YMM_RATE) 0.90-0.91x the time; the 2-4-row stream (`--rows 2 4 --only fp8`) 0.90-0.93x
// at 2 rows, 0.87-0.96x at 4. The early load replaced a one-byte shift (`vpslldq`) on the shuffle pipes, which
// the loads leave alone: streamed, wq_b / wo_b at one row 0.94-0.96x / 0.91-0.92x the time (forty-eighth session);
// it reads the byte before a prepared weight's stream, which PackedWeight::kLeadBytes keeps mapped.
struct Fp8BitsHalfRate : Fp8BitsChunk {  // the layout's constants; its own split and column
    // The 2-8-row stream (gemm_quant_avx2.cpp stream_rows) reads each activation broadcast in memory, [n][k][8] as
    // the one-row GEMV does, and takes a half chunk's four columns into its rows' chains before the next half's:
    // the FMAs read their activation from memory, with no vbroadcastss beside the decode (a scratch loop: 8 FMAs
    // with 4 broadcasts and 4 other vector ops 8.8-9.3 units, with the activations from memory 7.2-7.3), and only
    // one half chunk's split is live, so 4 rows' 8 chains fit the registers (before: a chain and the mask
    // spilled). Each chain still takes its columns in order: the same bits. Two threads, `bench-ops --per-call 10`
    // (two alternating rounds, 25th percentiles): wq_b and wo_b 0.78-0.95x the time at 4-8 rows, Engram wkv
    // 0.85-1.07x; 2-3 rows within the noise (docs/PERFORMANCE.md "Fifty-second session").
    static constexpr bool kBroadcastActs = true;
    struct Split {
        __m256i even, odd;  // words 0-3 | 4-7 of each lane: columns 0 | 2 (even), 1 | 3 (odd), masked
    };
    static inline Split split(const uint8_t* q) {  // the half chunk at q, and the 32 bytes from q - 1
        const __m256i keep = _mm256_set1_epi16(static_cast<short>(0x87f0));
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        const __m256i early = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q - 1));
        return {_mm256_and_si256(_mm256_srai_epi16(early, 4), keep), _mm256_and_si256(_mm256_srai_epi16(v, 4), keep)};
    }
    static inline __m256 column(const Split& s, int j) {
        const __m256i w = j % 2 ? s.odd : s.even, zero = _mm256_setzero_si256();
        return _mm256_castsi256_ps(j < 2 ? _mm256_unpacklo_epi16(zero, w) : _mm256_unpackhi_epi16(zero, w));
    }
    // Its stream takes split and column itself and Fp8BitsPanel decodes with them: hide Fp8BitsChunk's decode, whose
    // multiply form this CPU class runs slowly
    template <class F>
    void decode(const uint8_t* p, const F& f) const = delete;
};

// Fp8Chunk's decode (F16C) where ymm ops issue as two halves (Zen 1): the panel GEMM of more than fp8_stream_rows()
// rows, and the stream of rows fp8_bits_acts refused. Fp8BitsHalfRate's columns (value * 2^-120, subnormal codes as
// fp32 subnormals) times 2^112, exactly, are value * 2^-8, Fp8Chunk's columns bit for bit, so the tiles and block
// scales stay as they are. There F16C's path costs a vpermd (4 cycles a ymm) and four vcvtph2ps (2 each) per half
// chunk. In cache (`bench-ops --in-cache --rows 9 16 32 --only fp8`, two alternating runs) the panel GEMM ran 1.01-1.12x
// as fast. Weights without NaN codes (PackedWeight::plain_codes); not under DAZ, which would zero the subnormal
// columns.
struct Fp8BitsPanel : Fp8BitsHalfRate {
    static constexpr float kValueScale = 256.0f;  // as Fp8Chunk
    static constexpr float kActScale = 1.0f;      // the activations as they come
    static constexpr bool kBroadcastActs = false;
    template <class F>
    inline void decode(const uint8_t* p, const F& f) const {
        const __m256 up = _mm256_set1_ps(0x1p112f);
        decode_columns<Fp8BitsHalfRate>(
            p, [&](int j, __m256 col0, __m256 col1) { f(j, _mm256_mul_ps(col0, up), _mm256_mul_ps(col1, up)); });
    }
};

// Activation rows up to which the fp8 GEMM takes the bit-placing decode's stream (gemm_quant_avx2.cpp run), in turns
// of at most kStreamRows rows, rather than the row group decoded into a panel first: kStreamRows, and 8 where
// ymm ops issue as two halves (Zen 1). There the panel's decode cost more than the turns' repeated one below ~9 rows
// (one thread, `bench-ops --threads 1 --rows 5 6 8 12 --only wo_b --per-call 15`: 0.85-0.92x the time at 5-8 rows,
// 9-10 at parity, 12 1.06-1.15x; docs/PERFORMANCE.md "Fifty-first session").
inline int64_t fp8_stream_rows() { return ymm_half_rate() ? 8 : kStreamRows; }

// The fp8 GEMV of one activation row with this decode (t.n == 1, t.bits_acts set: the row broadcast, [k][8];
// gemv_fp8_bits_avx2.cpp).
void gemv_fp8_bits(const QuantGemmTask& t);

}  // namespace deepinfer::backend::cpu::avx2
