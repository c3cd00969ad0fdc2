// AVX-512 (bf16 dot product + VBMI) block-scaled GEMMs: fp8 x fp8 and fp8 x MXFP4 on the packed layouts
// of backend/cpu/packing.h, and the activation decode they read. Spec §4.3: each 32-column block product
// is exact (e4m3 and e2m1 values are exact in bf16, their products exact in fp32), summed in fp32 per
// block (vdpbf16ps: order within the block differs from the reference), scaled by sa * sw (powers of two)
// and accumulated over blocks in order with one FMA; one bf16 rounding at the end.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// One 16-row x 32-column weight block decoded to 16 registers: w[t] holds, in dword lane r, the bf16 pair
// of columns (2t, 2t + 1) of row r.
struct Fp8Block {
    Fp8ToBf16 dec;
    static constexpr int64_t kBytes = 512;
    inline void load(const uint8_t* p, __m512i (&w)[16]) const {
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) dec.decode(_mm512_load_si512(p + 64 * c), w[2 * c], w[2 * c + 1]);
    }
};

struct Fp4Block {
    __m512i lut = _mm512_load_si512(tables::kE2M1Bf16x2.v);
    static constexpr int64_t kBytes = 256;
    inline void load(const uint8_t* p, __m512i (&w)[16]) const {
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m512i v = _mm512_load_si512(p + 64 * c);
            w[4 * c + 0] = _mm512_permutexvar_epi16(v, lut);
            w[4 * c + 1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 4), lut);
            w[4 * c + 2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 8), lut);
            w[4 * c + 3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 12), lut);
        }
    }
};

inline __m512 dot(__m512 acc, __m512i w, uint32_t pair) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)_mm512_set1_epi32(static_cast<int>(pair)));
}

// R activation rows against one decoded block: partial sums in two chains (even / odd column pairs),
// then acc += partial * (sa * sw). a: pairs of the block in row 0, sa: scale of the block in row 0.
template <int R>
inline void apply_block(const __m512i (&w)[16], __m512 sw, const uint32_t* a, int64_t a_stride, const float* sa,
                        int64_t sa_stride, float* acc) {
    __m512 p0[R], p1[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) p0[r] = p1[r] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int t = 0; t < 16; t += 2) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            p0[r] = dot(p0[r], w[t], a[r * a_stride + t]);
            p1[r] = dot(p1[r], w[t + 1], a[r * a_stride + t + 1]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        const __m512 s = _mm512_mul_ps(sw, _mm512_set1_ps(sa[r * sa_stride]));
        const __m512 partial = _mm512_add_ps(p0[r], p1[r]);
        _mm512_store_ps(acc + 16 * r, _mm512_fmadd_ps(partial, s, _mm512_load_ps(acc + 16 * r)));
    }
}

template <class Block, class Scales>
void run(const QuantGemmTask& t, const Block& block, const Scales& scale_of) {
    const int64_t kb_count = t.k / 32, a_stride = t.k / 2;
    const auto* acts = static_cast<const uint32_t*>(t.acts);
    float* acc = t.scratch;
    for (int64_t g = 0; g < t.groups; ++g) {
        const uint8_t* codes = t.codes + g * kb_count * Block::kBytes;
        for (int64_t i = 0; i < t.n * 16; i += 16) _mm512_store_ps(acc + i, _mm512_setzero_ps());
        for (int64_t kb = 0; kb < kb_count; ++kb) {
            __m512i w[16];
            block.load(codes + kb * Block::kBytes, w);
            const __m512 sw = scale_of(g, kb);
            const uint32_t* a = acts + kb * 16;
            const float* sa = t.act_scales + kb;
            int64_t i = 0;
            for (; i + 4 <= t.n; i += 4)
                apply_block<4>(w, sw, a + i * a_stride, a_stride, sa + i * kb_count, kb_count, acc + 16 * i);
            switch (t.n - i) {
                case 3: apply_block<3>(w, sw, a + i * a_stride, a_stride, sa + i * kb_count, kb_count, acc + 16 * i); break;
                case 2: apply_block<2>(w, sw, a + i * a_stride, a_stride, sa + i * kb_count, kb_count, acc + 16 * i); break;
                case 1: apply_block<1>(w, sw, a + i * a_stride, a_stride, sa + i * kb_count, kb_count, acc + 16 * i); break;
                default: break;
            }
        }
        const int64_t valid = t.rows - g * 16;
        const __mmask16 mask = lane_mask(valid);
        for (int64_t i = 0; i < t.n; ++i)
            _mm256_mask_storeu_epi16(t.out + i * t.ldo + g * 16, mask, to_bf16(_mm512_load_ps(acc + 16 * i)));
    }
}

}  // namespace

void gemm_fp8(const QuantGemmTask& t) {
    const int64_t kb_count = t.k / 32;
    run(t, Fp8Block{}, [&](int64_t g, int64_t kb) { return _mm512_set1_ps(e8m0_to_float(t.scales[g * kb_count + kb])); });
}

void gemm_fp4(const QuantGemmTask& t) {
    const int64_t kb_count = t.k / 32;
    run(t, Fp4Block{}, [&](int64_t g, int64_t kb) {
        return e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.scales + (g * kb_count + kb) * 16)));
    });
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
