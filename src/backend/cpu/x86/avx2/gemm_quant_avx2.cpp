// AVX2 block-scaled GEMMs (fp8 x fp8, fp8 x MXFP4) on the packed layouts of backend/cpu/packing.h. Each
// 16-row x 32-column block is decoded to fp32 once (fp8 through the F16C converter, as value * 2^-8; e2m1
// as 2 * value through an int8 table) and every activation row runs over it with FMAs in column order.
// Products are exact, so each FMA rounds like the reference's `partial += a * w`: the block partials,
// and with them the whole result, are bit-identical to the scalar reference (spec §4.3).
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

inline void store_columns(float* buf, int k, int half, __m256 v) { _mm256_store_ps(buf + k * 16 + 8 * half, v); }

// buf [32 columns][16 rows] fp32 = weight / kValueScale (so partial sums are scaled back by it).
struct Fp8Block {
    static constexpr int64_t kBytes = 512;
    static constexpr float kValueScale = 256.0f;  // decoded as value * 2^-8
    void decode(const uint8_t* p, float* buf) const {
        // per 128-bit lane: the bytes of columns 0, 1, 2, 3 of the lane's 4 rows, one dword each
        const __m256i gather = _mm256_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 0, 2, 4, 6, 1,
                                                3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const __m256i sign = _mm256_set1_epi8(static_cast<char>(0x80)), low6 = _mm256_set1_epi8(0x3f);
        for (int c = 0; c < 8; ++c)
            for (int half = 0; half < 2; ++half) {
                __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * c + 32 * half));
                // lane 0: columns 0, 1 of rows 0-7 (8 bytes each); lane 1: columns 2, 3
                v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, gather), order);
                // e4m3 -> fp16 bytes: sign | eeee mmm shifted right by one bit (value * 2^-8, subnormals too)
                __m256i hi = _mm256_or_si256(_mm256_and_si256(v, sign),
                                             _mm256_and_si256(_mm256_srli_epi16(v, 1), low6));
                const __m256i nan = _mm256_cmpeq_epi8(_mm256_or_si256(v, sign), _mm256_set1_epi8(-1));
                hi = _mm256_or_si256(hi, _mm256_and_si256(nan, _mm256_set1_epi8(0x40)));  // 0x7f -> fp16 NaN
                const __m256i lo = _mm256_and_si256(_mm256_slli_epi16(v, 7), sign);
                const __m256i w01 = _mm256_unpacklo_epi8(lo, hi), w23 = _mm256_unpackhi_epi8(lo, hi);
                store_columns(buf, 4 * c + 0, half, _mm256_cvtph_ps(_mm256_castsi256_si128(w01)));
                store_columns(buf, 4 * c + 1, half, _mm256_cvtph_ps(_mm256_castsi256_si128(w23)));
                store_columns(buf, 4 * c + 2, half, _mm256_cvtph_ps(_mm256_extracti128_si256(w01, 1)));
                store_columns(buf, 4 * c + 3, half, _mm256_cvtph_ps(_mm256_extracti128_si256(w23, 1)));
            }
    }
};

struct Fp4Block {
    static constexpr int64_t kBytes = 256;
    static constexpr float kValueScale = 0.5f;  // decoded as 2 * value
    void decode(const uint8_t* p, float* buf) const {
        const __m256i lut = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables::kE2M1Twice.v)));
        const __m256i nib = _mm256_set1_epi8(0x0f);
        for (int c = 0; c < 4; ++c)
            for (int half = 0; half < 2; ++half) {
                const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * c + 32 * half));
                // dword r = row r; bytes of lo: columns 0, 4, 1, 5; of hi: columns 2, 6, 3, 7 (packing.h)
                const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(d, nib));
                const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi32(d, 4), nib));
                const __m256i col[8] = {
                    _mm256_srai_epi32(_mm256_slli_epi32(lo, 24), 24), _mm256_srai_epi32(_mm256_slli_epi32(lo, 8), 24),
                    _mm256_srai_epi32(_mm256_slli_epi32(hi, 24), 24), _mm256_srai_epi32(_mm256_slli_epi32(hi, 8), 24),
                    _mm256_srai_epi32(_mm256_slli_epi32(lo, 16), 24), _mm256_srai_epi32(lo, 24),
                    _mm256_srai_epi32(_mm256_slli_epi32(hi, 16), 24), _mm256_srai_epi32(hi, 24)};
                for (int j = 0; j < 8; ++j) store_columns(buf, 8 * c + j, half, _mm256_cvtepi32_ps(col[j]));
            }
    }
};

// R activation rows against one decoded block; acc += partial * s with s = sa * sw * kValueScale.
template <int R>
inline void apply_block(const float* buf, __m256 sw0, __m256 sw1, const float* a, int64_t a_stride, const float* sa,
                        int64_t sa_stride, float* acc) {
    __m256 p[R][2];
    for (int r = 0; r < R; ++r) p[r][0] = p[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int k = 0; k < 32; ++k) {
        const __m256 w0 = _mm256_load_ps(buf + 16 * k), w1 = _mm256_load_ps(buf + 16 * k + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 x = _mm256_broadcast_ss(a + r * a_stride + k);
            p[r][0] = _mm256_fmadd_ps(w0, x, p[r][0]);
            p[r][1] = _mm256_fmadd_ps(w1, x, p[r][1]);
        }
    }
    for (int r = 0; r < R; ++r) {
        const __m256 s = _mm256_broadcast_ss(sa + r * sa_stride);
        float* ar = acc + 16 * r;
        _mm256_store_ps(ar, _mm256_fmadd_ps(p[r][0], _mm256_mul_ps(sw0, s), _mm256_load_ps(ar)));
        _mm256_store_ps(ar + 8, _mm256_fmadd_ps(p[r][1], _mm256_mul_ps(sw1, s), _mm256_load_ps(ar + 8)));
    }
}

template <class Block, class Scales>
void run(const QuantGemmTask& t, const Block& block, const Scales& scales_of) {
    const int64_t kb_count = t.k / 32;
    const auto* acts = static_cast<const float*>(t.acts);
    float* acc = t.scratch;
    float* buf = t.scratch + kActRowChunk * 16;
    for (int64_t g = 0; g < t.groups; ++g) {
        const uint8_t* codes = t.codes + g * kb_count * Block::kBytes;
        for (int64_t i = 0; i < t.n * 16; i += 8) _mm256_store_ps(acc + i, _mm256_setzero_ps());
        for (int64_t kb = 0; kb < kb_count; ++kb) {
            block.decode(codes + kb * Block::kBytes, buf);
            __m256 sw0, sw1;
            scales_of(g, kb, sw0, sw1);
            const __m256 f = _mm256_set1_ps(Block::kValueScale);
            sw0 = _mm256_mul_ps(sw0, f);
            sw1 = _mm256_mul_ps(sw1, f);
            const float* a = acts + kb * 32;
            const float* sa = t.act_scales + kb;
            int64_t i = 0;
            for (; i + 4 <= t.n; i += 4)
                apply_block<4>(buf, sw0, sw1, a + i * t.k, t.k, sa + i * kb_count, kb_count, acc + 16 * i);
            for (; i + 2 <= t.n; i += 2)
                apply_block<2>(buf, sw0, sw1, a + i * t.k, t.k, sa + i * kb_count, kb_count, acc + 16 * i);
            if (i < t.n) apply_block<1>(buf, sw0, sw1, a + i * t.k, t.k, sa + i * kb_count, kb_count, acc + 16 * i);
        }
        const int64_t valid = t.rows - g * 16 < 16 ? t.rows - g * 16 : 16;
        for (int64_t i = 0; i < t.n; ++i) {
            auto* o = reinterpret_cast<uint16_t*>(t.out + i * t.ldo + g * 16);
            alignas(32) uint16_t row[16];
            _mm_store_si128(reinterpret_cast<__m128i*>(row), to_bf16(_mm256_load_ps(acc + 16 * i)));
            _mm_store_si128(reinterpret_cast<__m128i*>(row + 8), to_bf16(_mm256_load_ps(acc + 16 * i + 8)));
            for (int64_t r = 0; r < valid; ++r) o[r] = row[r];
        }
    }
}

}  // namespace

void gemm_fp8(const QuantGemmTask& t) {
    const int64_t kb_count = t.k / 32;
    run(t, Fp8Block{}, [&](int64_t g, int64_t kb, __m256& sw0, __m256& sw1) {
        sw0 = sw1 = _mm256_set1_ps(e8m0_to_float(t.scales[g * kb_count + kb]));
    });
}

void gemm_fp4(const QuantGemmTask& t) {
    const int64_t kb_count = t.k / 32;
    run(t, Fp4Block{}, [&](int64_t g, int64_t kb, __m256& sw0, __m256& sw1) {
        const uint8_t* s = t.scales + (g * kb_count + kb) * 16;
        sw0 = e8m0_to_ps(s);
        sw1 = e8m0_to_ps(s + 8);
    });
}

void decode_acts(const uint8_t* codes, const uint8_t* scales, int64_t n, int64_t k, void* values, float* act_scales) {
    auto* out = static_cast<float*>(values);
    for (int64_t i = 0; i < n * k; ++i) out[i] = tables::kE4M3.v[codes[i]];
    for (int64_t j = 0; j < n * (k / 32); ++j) act_scales[j] = e8m0_to_float(scales[j]);
}

}  // namespace deepinfer::backend::cpu::avx2
