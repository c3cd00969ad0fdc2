// What the AVX2 MXFP4 kernels share (gemm_quant_avx2.cpp, gemv_fp4_int_avx2.cpp): the chunk decoder of the
// packed layout (backend/cpu/packing.h), the block scaling and the output stores. AVX2 translation units only.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/isa_ops.h"
#include "backend/cpu/x86/x86_tables.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu::avx2 {

// e2m1 -> 2 * value as an int8 (table lookup), moved into the top byte of its row's dword by a second
// byte shuffle, so one int32 -> fp32 conversion gives 2^25 * value exactly.
struct Fp4Chunk {
    static constexpr int kCols = 8, kChunks = 4;
    static constexpr int64_t kBlockBytes = 256, kScaleBytes = 16;  // a group's block: 16x32 codes, a scale per row
    static constexpr float kValueScale = 1.0f / 33554432.0f;  // 2^-25
    static constexpr float kActScale = 1.0f;
    static constexpr bool kBroadcastActs = false;
    // dword r = row r; bytes of lo: columns 0, 4, 1, 5; of hi: columns 2, 6, 3, 7 (packing.h)
    static inline void to_int8(const uint8_t* p, __m256i& lo, __m256i& hi) {
        const __m256i lut =
            _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Twice.v)));
        const __m256i nib = _mm256_set1_epi8(0x0f);
        const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(d, nib));
        hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi32(d, 4), nib));
    }
    static inline __m256i top(int byte) {  // byte `byte` of each dword to its top byte, zeros below
        const char z = static_cast<char>(0x80), b = static_cast<char>(byte);
        return _mm256_setr_epi8(z, z, z, b, z, z, z, static_cast<char>(4 + b), z, z, z, static_cast<char>(8 + b), z, z,
                                z, static_cast<char>(12 + b), z, z, z, b, z, z, z, static_cast<char>(4 + b), z, z, z,
                                static_cast<char>(8 + b), z, z, z, static_cast<char>(12 + b));
    }
    template <class F>
    inline void decode(const uint8_t* p, const F& f) const {
        __m256i alo, ahi, blo, bhi;
        to_int8(p, alo, ahi);
        to_int8(p + 32, blo, bhi);
        columns(alo, ahi, blo, bhi, f);
    }
    // f(j, rows 0-7, rows 8-15) for the 8 columns j of a chunk from its int8 form (to_int8 of each half: a* rows
    // 0-7, b* rows 8-15).
    template <class F>
    static inline void columns(__m256i alo, __m256i ahi, __m256i blo, __m256i bhi, const F& f) {
        auto col = [](__m256i v, int byte) { return _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v, top(byte))); };
        f(0, col(alo, 0), col(blo, 0));
        f(1, col(alo, 2), col(blo, 2));
        f(2, col(ahi, 0), col(bhi, 0));
        f(3, col(ahi, 2), col(bhi, 2));
        f(4, col(alo, 1), col(blo, 1));
        f(5, col(alo, 3), col(blo, 3));
        f(6, col(ahi, 1), col(bhi, 1));
        f(7, col(ahi, 3), col(bhi, 3));
    }
};

// acc[16] += partial * (sw * sa * kValueScale) for one activation row.
inline void scale_into(float* acc, __m256 p0, __m256 p1, __m256 sw0, __m256 sw1, float sa) {
    const __m256 s = _mm256_set1_ps(sa);
    _mm256_store_ps(acc, _mm256_fmadd_ps(p0, _mm256_mul_ps(sw0, s), _mm256_load_ps(acc)));
    _mm256_store_ps(acc + 8, _mm256_fmadd_ps(p1, _mm256_mul_ps(sw1, s), _mm256_load_ps(acc + 8)));
}

inline void store_rows(const QuantGemmTask& t, int64_t g, int64_t i, const float* acc) {
    const int64_t valid = t.rows - g * 16 < 16 ? t.rows - g * 16 : 16;
    if (t.out_f32) {
        float* o = t.out_f32 + i * t.ldo + g * 16;
        for (int64_t r = 0; r < valid; ++r) o[r] = acc[r];
        return;
    }
    auto* o = reinterpret_cast<uint16_t*>(t.out + i * t.ldo + g * 16);
    alignas(32) uint16_t row[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(row), to_bf16(_mm256_load_ps(acc)));
    _mm_store_si128(reinterpret_cast<__m128i*>(row + 8), to_bf16(_mm256_load_ps(acc + 8)));
    for (int64_t r = 0; r < valid; ++r) o[r] = row[r];
}

// Activation row i's block partials part[kb][G][16] (unscaled) of the G groups from g0 scaled into its sums in block
// order -- scale_into's FMA, p * ((sw * f) * sa) -- and stored: the GEMVs' second pass (one row, or each of two). The sums stay in
// registers: added through memory, each block's load and store made a chain (in-process A/B on Zen 3: 0.90-0.95 of
// that time for MXFP4, 0.955-0.98 for fp8). scales_of(g, kb, sw0, sw1): the block scales of group g0 + g.
template <int G, class Scales>
inline void scale_partials_and_store(const QuantGemmTask& t, int64_t g0, const float* part, float* acc, __m256 f,
                                     const Scales& scales_of, int64_t i = 0) {
    const int64_t kb_count = t.k / 32;
    __m256 s00 = _mm256_setzero_ps(), s01 = s00, s10 = s00, s11 = s00;  // [group][rows 0-7, 8-15]
    for (int64_t kb = 0; kb < kb_count; ++kb) {
        const __m256 sa = _mm256_set1_ps(t.act_scales[i * kb_count + kb]);
        const float* q = part + kb * G * 16;
        const auto scale = [&](int g, __m256& lo, __m256& hi) __attribute__((always_inline)) {
            __m256 sw0, sw1;
            scales_of(g, kb, sw0, sw1);
            lo = _mm256_fmadd_ps(_mm256_load_ps(q + 16 * g), _mm256_mul_ps(_mm256_mul_ps(sw0, f), sa), lo);
            hi = _mm256_fmadd_ps(_mm256_load_ps(q + 16 * g + 8), _mm256_mul_ps(_mm256_mul_ps(sw1, f), sa), hi);
        };
        scale(0, s00, s01);
        if constexpr (G == 2) scale(1, s10, s11);
    }
    _mm256_store_ps(acc, s00);
    _mm256_store_ps(acc + 8, s01);
    if constexpr (G == 2) {
        _mm256_store_ps(acc + 16, s10);
        _mm256_store_ps(acc + 24, s11);
    }
    for (int g = 0; g < G; ++g) store_rows(t, g0 + g, i, acc + 16 * g);
}

// Software prefetch distance into L1 along the pair's stream of the fp32 kernel of 2-8 rows (gemm_quant_avx2.cpp
// stream_rows; as in the AVX-512 kernels: 3 KB ahead gained 5-17% at n = 4 streamed). That kernel is compute-bound on
// the AVX2 cores measured, where 6 KB into L2 measured the same (Zen 4, 0.94-1.09x at 2 and 4 rows).
constexpr int64_t kPrefetchBytes = 3072;
// The request plan of the one-row GEMVs and the MXFP4 GEMM of 2-4 rows (gemv_fp4_int_avx2.cpp,
// gemv_fp8_bits_avx2.cpp, gemm_fp4_few_rows_avx2.cpp), every form: each line of the stream kPairAheadBytes ahead
// into L2. The out-of-line blocks of fp4_planes.h request theirs the same way, so that the stream has no hole where
// they stand. The plain form requested 3 KB ahead into L1 (kPrefetchBytes) until the sixtieth session: on Zen 4 in
// that form (`DEEPINFER_AVX_VNNI=off`, in-process A/B, the two plans call by call, docs/PERFORMANCE.md "Sixtieth
// session") it took 1.24-1.70x the time of 6 KB into L2 for the MXFP4 GEMV (one and two threads), 1.54-1.72x for the
// MoE of 1-4 rows, 0.98-1.14x for fp8 at one row, and the AVX2 decode step 1.21-1.24x -- a core's stream capped,
// presumably by the few L1 fill buffers each request holds for a memory latency. On Zen 3 and Zen 1, whose AVX2
// decodes are compute-bound, the two plans measured within 1-5% of each other (twenty-sixth, forty-seventh sessions).
inline constexpr int64_t kPairAheadBytes = 6144;
inline void request_ahead(const uint8_t* at) {
    _mm_prefetch(reinterpret_cast<const char*>(at + kPairAheadBytes), _MM_HINT_T1);
}

// The e8m0 scales of a block's 16 rows, the 16 bytes at s (packed: [G][KB][16] bytes, pairs interleaved). A weight
// without the codes 0 (2^-127) and 255 (NaN) (PackedWeight::plain_scales) takes the shift alone: 8 vector ops
// fewer per block.
inline void fp4_scales_at(const QuantGemmTask& t, const uint8_t* s, __m256& sw0, __m256& sw1) {
    if (t.plain_scales) {
        const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)));
        const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 8)));
        sw0 = _mm256_castsi256_ps(_mm256_slli_epi32(b, 23));
        sw1 = _mm256_castsi256_ps(_mm256_slli_epi32(c, 23));
        return;
    }
    sw0 = e8m0_to_ps(s);
    sw1 = e8m0_to_ps(s + 8);
}
// ... of block kb of group g
inline void fp4_scales(const QuantGemmTask& t, int64_t g, int64_t kb, __m256& sw0, __m256& sw1) {
    fp4_scales_at(t, t.scales + packed_scale_offset(g, t.groups, kb, t.k / 32, Fp4Chunk::kScaleBytes), sw0, sw1);
}

// The integer form of an act_quant row that AVX2's panel GEMM reads (fp4_panel_rows; gemm_fp4_int_avx2.cpp; one row
// reads the planes of Fp4RowLayout instead), per block kb with integers v (Fp4RowLayout has their definition):
//   words    [kb][32] int16: v >> shift (the magnitude shifted, the sign kept), in column order
//   lows     [kb][32] int16: the bits the shift drops (v - (words << shift)), in column order
//   unit     [kb] fp32: as Fp4RowLayout's
//   lo_pairs [kb] uint16: bit q set when column 2q or 2q + 1 has low bits
//   shift    [kb] uint8: the least shift that fits every v in an int16 and keeps 12 * 256 * sum |words| below
//            2^31 (the panel's weights come times 256: gemm_fp4_int_avx2.cpp) (0..3), or kChainBlock when the
//            integer sum might not be the fp32 chain's (12 * sum |v| >= 2^24: a partial sum could round) or the
//            block holds a NaN code
// Rows lie `bytes` apart (a multiple of 64).
struct Fp4PanelRow {
    int64_t words, lows, unit, lo_pairs, shift, bytes;
};
inline constexpr uint8_t kChainBlock = 255;
inline constexpr Fp4PanelRow fp4_panel_row(int64_t kb_count) {
    return {0, 64 * kb_count, 128 * kb_count, 132 * kb_count, 134 * kb_count, (135 * kb_count + 63) / 64 * 64};
}

// Where the codes of group g + 1 of the task lie (NextGroup), for chunks of type Chunk; none after the last.
template <class Chunk>
inline NextGroup next_group(const QuantGemmTask& t, int64_t g) {
    if (g + 1 >= t.groups) return {};
    const PackedGroup pg = packed_group(g + 1, t.groups, t.k / 32, Chunk::kBlockBytes, kPackedChunkBytes);
    return {t.codes + pg.offset, pg.block_stride, pg.piece_stride};
}

// The three forms of the integer MXFP4 kernels below, as their template argument: plain AVX2 (vpmaddubsw, vpmaddwd and
// adds); AVX-VNNI (vpdpbusd / vpdpwssd: one instruction for a multiply, its widening and the add); and the same
// instructions EVEX-encoded on the same ymm registers, for CPUs that have them only with AVX-512 (AVX512-VNNI and
// AVX512VL, without the bf16 the AVX-512 table needs: Cascade Lake, Ice Lake). Chosen per call by
// core/cpu_features.h avx2_vnni_encoding(). All sum the same integers: the same bits.
// Their translation units are built with -mavxvnni for the VNNI intrinsics (src/backend/CMakeLists.txt), so nothing
// but review stops the compiler from using a VNNI instruction in the plain form, which AVX2-only CPUs (Zen 3) run;
// the EVEX form's dot products are inline assembly (vnni_dot.h) and its panel GEMM functions built for AVX-512 by their
// target attributes (gemm_fp4_zmm_avx2.cpp); the files themselves are not built for AVX-512.
// tests/ops/avx2_isa_check.py disassembles the AVX2 objects and allows VEX-encoded VNNI only in functions named with
// AvxVnni, EVEX-encoded only in those named with EvexVnni.
struct PlainAvx2 {
    static constexpr bool kVnni = false, kEvex = false;
};
struct AvxVnni {
    static constexpr bool kVnni = true, kEvex = false;
};
struct EvexVnni {
    static constexpr bool kVnni = true, kEvex = true;
};
// f(AvxVnni{}), f(EvexVnni{}) or f(PlainAvx2{}) by avx2_vnni_encoding(): the one place the kernels choose their form.
template <class F>
inline void with_form(F&& f) {
    switch (avx2_vnni_encoding()) {
        case VnniEncoding::kVex: f(AvxVnni{}); break;
        case VnniEncoding::kEvex: f(EvexVnni{}); break;
        case VnniEncoding::kNone: f(PlainAvx2{}); break;
    }
}

// Whether a GEMM of n activation rows runs the panel GEMM (gemm_fp4_int; its rows in the form Fp4PanelRow): from
// kStreamRows + 1 rows, and from 3 in the EvexVnni form, whose zmm tiles took w1 / w2 (Zen 5, streamed, two threads)
// at 4 rows from 385-391 us on the planes (gemm_fp4_few_rows) to 308-324, at 3 from 300-314 to 249-268; at 2 rows
// both 229-263. And from 3 in the plain form where ymm ops issue as two halves (Zen 1), whose 3-4 rows otherwise go
// to the fp32 kernel: one thread, w1 / w2 at 3 rows 0.83-0.85x the time on the panel, at 4 rows 0.73-0.81x; at 2 the
// planes stay (w1 1.07-1.16x on the panel; docs/PERFORMANCE.md "Fifty-first session").
inline constexpr int64_t kEarlyPanelRows = 3;
inline bool fp4_panel_rows(int64_t n) {
    if (n > kStreamRows) return true;
    if (n < kEarlyPanelRows) return false;
    const VnniEncoding form = avx2_vnni_encoding();
    return form == VnniEncoding::kEvex || (form == VnniEncoding::kNone && ymm_half_rate());
}

// The MXFP4 GEMV of one activation row in its integer form (t.n == 1, t.fp4_row set; gemv_fp4_int_avx2.cpp).
void gemv_fp4_int(const QuantGemmTask& t);
// The MXFP4 GEMM of 2-4 rows on the planes (t.fp4_row set: 2 rows, 3-4 with AVX-VNNI; gemm_fp4_few_rows_avx2.cpp).
void gemm_fp4_few_rows(const QuantGemmTask& t);
// The MXFP4 GEMM of fp4_panel_rows(n) rows in their integer form (t.fp4_row set; gemm_fp4_int_avx2.cpp, the EvexVnni
// form in gemm_fp4_zmm_avx2.cpp).
void gemm_fp4_int(const QuantGemmTask& t);

}  // namespace deepinfer::backend::cpu::avx2
