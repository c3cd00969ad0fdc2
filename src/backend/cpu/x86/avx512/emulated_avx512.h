// The emulated AVX-512 build (CMake option DEEPINFER_EMULATE_AVX512, preset avx512emu): the AVX-512 kernel TUs
// compiled for AVX2 against SIMDe's portable intrinsics (Debian's libsimde-dev), so their code paths run -- and
// the op tests check them against the scalar reference -- on a CPU without AVX-512. Test-only: far slower than
// the real instructions and never the product build. AMX is emulated too (emulated_amx.h).
//
// SIMDe (0.7.4) lacks some intrinsics the kernels use; they are defined below by their Intel pseudo-code, one
// lane at a time: masked loads and stores touch only the selected elements (as the hardware's fault suppression
// does), conversions truncate, reductions add in GCC's order (avx512fintrin.h's tree, halves first).
#pragma once

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace deepinfer::emulated_avx512 {

// Lanes of a vector as an array of T, and back.
template <class T, class V>
struct Lanes {
    static constexpr int kCount = static_cast<int>(sizeof(V) / sizeof(T));
    T v[kCount];
    explicit Lanes(const V& x) { std::memcpy(v, &x, sizeof(V)); }
    Lanes() : v{} {}
    V get() const {
        V x;
        std::memcpy(&x, v, sizeof(V));
        return x;
    }
};

template <class T, class V, class M>
inline void mask_store(void* p, M k, V x) {
    const Lanes<T, V> l(x);
    for (int i = 0; i < l.kCount; ++i)
        if ((k >> i) & 1) std::memcpy(static_cast<char*>(p) + i * sizeof(T), &l.v[i], sizeof(T));
}
template <class T, class V, class M>
inline V maskz_load(M k, const void* p) {
    Lanes<T, V> l;
    for (int i = 0; i < l.kCount; ++i)
        if ((k >> i) & 1) std::memcpy(&l.v[i], static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
    return l.get();
}
template <class V, class I, class M>
inline V mask_gather_ps(V src, M k, I idx, const void* base, int scale) {
    Lanes<float, V> out(src);
    const Lanes<int32_t, I> ix(idx);
    for (int i = 0; i < out.kCount; ++i)
        if ((k >> i) & 1)
            std::memcpy(&out.v[i], static_cast<const char*>(base) + static_cast<int64_t>(ix.v[i]) * scale, 4);
    return out.get();
}
// Compare lanes of type T: bit i of the mask = pred(a[i], b[i]) and bit i of k.
template <class T, class M, class V, class P>
inline M compare(M k, V a, V b, P pred) {
    const Lanes<T, V> x(a), y(b);
    M m = 0;
    for (int i = 0; i < x.kCount; ++i)
        if (((k >> i) & 1) && pred(x.v[i], y.v[i])) m = static_cast<M>(m | (M{1} << i));
    return m;
}
// Lane-wise conversion of the N lanes of a into the first N lanes of type To of a vector R (rest zero).
template <class To, class From, class R, class V, class F>
inline R convert(V a, F f) {
    const Lanes<From, V> x(a);
    Lanes<To, R> r;
    for (int i = 0; i < x.kCount; ++i) r.v[i] = f(x.v[i]);
    return r.get();
}

inline int32_t truncate_to_int32(float x) {
    // vcvttps2dq: NaN and out-of-range values give the "integer indefinite" 0x80000000
    if (!(x > -2147483904.0f && x < 2147483648.0f)) return INT32_MIN;
    return static_cast<int32_t>(x);
}

// vdpbf16ps, as the SDM defines it (SIMDe adds the even product first and keeps denormals): per lane the odd
// pair's product, then the even pair's, each added with one rounding (RNE), denormal inputs read as zero and
// denormal results flushed to zero.
inline float flush_denormal(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
inline float bf16_bits_to_float(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return flush_denormal(f);
}
inline __m512 dpbf16_ps(__m512 src, __m512bh a, __m512bh b) {
    Lanes<float, __m512> acc(src);
    const Lanes<uint16_t, __m512bh> x(a), y(b);
    for (int i = 0; i < 16; ++i) {
        float s = flush_denormal(acc.v[i]);
        for (int h : {1, 0})
            s = flush_denormal(std::fma(bf16_bits_to_float(x.v[2 * i + h]), bf16_bits_to_float(y.v[2 * i + h]), s));
        acc.v[i] = s;
    }
    return acc.get();
}

inline float reduce_add_ps(__m512 a) {
    const Lanes<float, __m512> x(a);
    float s8[8], s4[4];
    for (int i = 0; i < 8; ++i) s8[i] = x.v[i + 8] + x.v[i];
    for (int i = 0; i < 4; ++i) s4[i] = s8[i + 4] + s8[i];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}
inline float reduce_max_ps(__m512 a) {
    const Lanes<float, __m512> x(a);
    float s8[8], s4[4];
    for (int i = 0; i < 8; ++i) s8[i] = x.v[i + 8] > x.v[i] ? x.v[i + 8] : x.v[i];
    for (int i = 0; i < 4; ++i) s4[i] = s8[i + 4] > s8[i] ? s8[i + 4] : s8[i];
    const float a02 = s4[0] > s4[2] ? s4[0] : s4[2], a13 = s4[1] > s4[3] ? s4[1] : s4[3];
    return a02 > a13 ? a02 : a13;
}

}  // namespace deepinfer::emulated_avx512

namespace deepinfer::emulated_avx512::intrinsics {
namespace e = deepinfer::emulated_avx512;

inline void mm256_mask_storeu_epi16(void* p, __mmask16 k, __m256i x) { e::mask_store<uint16_t>(p, k, x); }
inline __m256i mm256_maskz_loadu_epi16(__mmask16 k, const void* p) { return e::maskz_load<uint16_t, __m256i>(k, p); }
inline void mm512_mask_storeu_epi32(void* p, __mmask16 k, __m512i x) { e::mask_store<uint32_t>(p, k, x); }
inline void mm512_mask_storeu_ps(void* p, __mmask16 k, __m512 x) { e::mask_store<float>(p, k, x); }
inline __m512i mm512_maskz_loadu_epi8(__mmask64 k, const void* p) { return e::maskz_load<uint8_t, __m512i>(k, p); }
inline __m512i mm512_maskz_loadu_epi16(__mmask32 k, const void* p) { return e::maskz_load<uint16_t, __m512i>(k, p); }
inline __m512i mm512_maskz_loadu_epi32(__mmask16 k, const void* p) { return e::maskz_load<uint32_t, __m512i>(k, p); }
inline __m512 mm512_maskz_loadu_ps(__mmask16 k, const void* p) { return e::maskz_load<float, __m512>(k, p); }
inline __m256 mm256_mmask_i32gather_ps(__m256 src, __mmask8 k, __m256i idx, const void* base, int scale) {
    return e::mask_gather_ps(src, k, idx, base, scale);
}
inline __m512 mm512_mask_i32gather_ps(__m512 src, __mmask16 k, __m512i idx, const void* base, int scale) {
    return e::mask_gather_ps(src, k, idx, base, scale);
}

inline __mmask32 mm512_cmpeq_epi16_mask(__m512i a, __m512i b) {
    return e::compare<uint16_t, __mmask32>(~__mmask32{0}, a, b, [](uint16_t x, uint16_t y) { return x == y; });
}
inline __mmask32 mm512_cmplt_epu16_mask(__m512i a, __m512i b) {
    return e::compare<uint16_t, __mmask32>(~__mmask32{0}, a, b, [](uint16_t x, uint16_t y) { return x < y; });
}
inline __mmask16 mm512_mask_cmpgt_epu32_mask(__mmask16 k, __m512i a, __m512i b) {
    return e::compare<uint32_t, __mmask16>(k, a, b, [](uint32_t x, uint32_t y) { return x > y; });
}
inline __mmask16 mm512_cmpgt_epu32_mask(__m512i a, __m512i b) {
    return mm512_mask_cmpgt_epu32_mask(static_cast<__mmask16>(0xffff), a, b);
}
inline __mmask16 mm512_cmplt_epi32_mask(__m512i a, __m512i b) {
    return e::compare<int32_t, __mmask16>(static_cast<__mmask16>(0xffff), a, b,
                                          [](int32_t x, int32_t y) { return x < y; });
}

inline __m256i mm512_cvtepi32_epi16(__m512i a) {
    return e::convert<uint16_t, uint32_t, __m256i>(a, [](uint32_t x) { return static_cast<uint16_t>(x); });
}
inline __m128i mm512_cvtepi32_epi8(__m512i a) {
    return e::convert<uint8_t, uint32_t, __m128i>(a, [](uint32_t x) { return static_cast<uint8_t>(x); });
}
inline __m512 mm512_cvtepi32_ps(__m512i a) {
    return e::convert<float, int32_t, __m512>(a, [](int32_t x) { return static_cast<float>(x); });
}
inline __m512i mm512_cvtepu16_epi32(__m256i a) {
    return e::convert<uint32_t, uint16_t, __m512i>(a, [](uint16_t x) { return static_cast<uint32_t>(x); });
}
inline __m512i mm512_cvtepu8_epi32(__m128i a) {
    return e::convert<uint32_t, uint8_t, __m512i>(a, [](uint8_t x) { return static_cast<uint32_t>(x); });
}
inline __m512i mm512_cvttps_epi32(__m512 a) { return e::convert<int32_t, float, __m512i>(a, e::truncate_to_int32); }
inline float mm512_cvtss_f32(__m512 a) { return e::Lanes<float, __m512>(a).v[0]; }
inline __m256 mm512_extractf32x8_ps(__m512 a, int imm) {
    const e::Lanes<float, __m512> x(a);
    e::Lanes<float, __m256> r;
    for (int i = 0; i < 8; ++i) r.v[i] = x.v[(imm & 1) * 8 + i];
    return r.get();
}
inline __m512 mm512_permute_ps(__m512 a, int imm) {
    const e::Lanes<float, __m512> x(a);
    e::Lanes<float, __m512> r;
    for (int i = 0; i < 16; ++i) r.v[i] = x.v[(i & ~3) + ((imm >> (2 * (i & 3))) & 3)];
    return r.get();
}
inline __m512i mm512_srai_epi32(__m512i a, unsigned int count) {
    const int c = count > 31 ? 31 : static_cast<int>(count);
    return e::convert<int32_t, int32_t, __m512i>(a, [c](int32_t x) { return x >> c; });
}
inline int64_t mm512_reduce_add_epi64(__m512i a) {
    const e::Lanes<int64_t, __m512i> x(a);
    uint64_t s = 0;
    for (int64_t v : x.v) s += static_cast<uint64_t>(v);
    return static_cast<int64_t>(s);
}
inline int mm512_reduce_add_epi32(__m512i a) {
    const e::Lanes<int32_t, __m512i> x(a);
    uint32_t s = 0;
    for (int32_t v : x.v) s += static_cast<uint32_t>(v);
    return static_cast<int>(s);
}
inline unsigned mm512_reduce_min_epu32(__m512i a) {
    const e::Lanes<uint32_t, __m512i> x(a);
    uint32_t m = x.v[0];
    for (uint32_t v : x.v) m = v < m ? v : m;
    return m;
}
inline __m512 mm512_dpbf16_ps(__m512 src, __m512bh a, __m512bh b) { return e::dpbf16_ps(src, a, b); }
inline float mm512_reduce_add_ps(__m512 a) { return e::reduce_add_ps(a); }
inline float mm512_reduce_max_ps(__m512 a) { return e::reduce_max_ps(a); }
// The non-temporal hint changes no value: a plain store.
inline void mm512_stream_si512(void* p, __m512i x) { std::memcpy(p, &x, sizeof(x)); }

}  // namespace deepinfer::emulated_avx512::intrinsics

// The intrinsic names now mean the definitions above (GCC's own declarations need AVX-512 and may be macros).
#define DEEPINFER_EMU(name) deepinfer::emulated_avx512::intrinsics::name
#undef _mm256_mask_storeu_epi16
#define _mm256_mask_storeu_epi16 DEEPINFER_EMU(mm256_mask_storeu_epi16)
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16 DEEPINFER_EMU(mm256_maskz_loadu_epi16)
#undef _mm512_mask_storeu_epi32
#define _mm512_mask_storeu_epi32 DEEPINFER_EMU(mm512_mask_storeu_epi32)
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps DEEPINFER_EMU(mm512_mask_storeu_ps)
#undef _mm512_maskz_loadu_epi8
#define _mm512_maskz_loadu_epi8 DEEPINFER_EMU(mm512_maskz_loadu_epi8)
#undef _mm512_maskz_loadu_epi16
#define _mm512_maskz_loadu_epi16 DEEPINFER_EMU(mm512_maskz_loadu_epi16)
#undef _mm512_maskz_loadu_epi32
#define _mm512_maskz_loadu_epi32 DEEPINFER_EMU(mm512_maskz_loadu_epi32)
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps DEEPINFER_EMU(mm512_maskz_loadu_ps)
#undef _mm256_mmask_i32gather_ps
#define _mm256_mmask_i32gather_ps DEEPINFER_EMU(mm256_mmask_i32gather_ps)
#undef _mm512_mask_i32gather_ps
#define _mm512_mask_i32gather_ps DEEPINFER_EMU(mm512_mask_i32gather_ps)
#undef _mm512_cmpeq_epi16_mask
#define _mm512_cmpeq_epi16_mask DEEPINFER_EMU(mm512_cmpeq_epi16_mask)
#undef _mm512_cmplt_epu16_mask
#define _mm512_cmplt_epu16_mask DEEPINFER_EMU(mm512_cmplt_epu16_mask)
#undef _mm512_mask_cmpgt_epu32_mask
#define _mm512_mask_cmpgt_epu32_mask DEEPINFER_EMU(mm512_mask_cmpgt_epu32_mask)
#undef _mm512_cmpgt_epu32_mask
#define _mm512_cmpgt_epu32_mask DEEPINFER_EMU(mm512_cmpgt_epu32_mask)
#undef _mm512_cmplt_epi32_mask
#define _mm512_cmplt_epi32_mask DEEPINFER_EMU(mm512_cmplt_epi32_mask)
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16 DEEPINFER_EMU(mm512_cvtepi32_epi16)
#undef _mm512_cvtepi32_epi8
#define _mm512_cvtepi32_epi8 DEEPINFER_EMU(mm512_cvtepi32_epi8)
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps DEEPINFER_EMU(mm512_cvtepi32_ps)
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32 DEEPINFER_EMU(mm512_cvtepu16_epi32)
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32 DEEPINFER_EMU(mm512_cvtepu8_epi32)
#undef _mm512_cvttps_epi32
#define _mm512_cvttps_epi32 DEEPINFER_EMU(mm512_cvttps_epi32)
#undef _mm512_cvtss_f32
#define _mm512_cvtss_f32 DEEPINFER_EMU(mm512_cvtss_f32)
#undef _mm512_extractf32x8_ps
#define _mm512_extractf32x8_ps DEEPINFER_EMU(mm512_extractf32x8_ps)
#undef _mm512_permute_ps
#define _mm512_permute_ps DEEPINFER_EMU(mm512_permute_ps)
#undef _mm512_srai_epi32
#define _mm512_srai_epi32 DEEPINFER_EMU(mm512_srai_epi32)
#undef _mm512_reduce_add_epi64
#define _mm512_reduce_add_epi64 DEEPINFER_EMU(mm512_reduce_add_epi64)
#undef _mm512_reduce_add_epi32
#define _mm512_reduce_add_epi32 DEEPINFER_EMU(mm512_reduce_add_epi32)
#undef _mm512_reduce_min_epu32
#define _mm512_reduce_min_epu32 DEEPINFER_EMU(mm512_reduce_min_epu32)
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps DEEPINFER_EMU(mm512_dpbf16_ps)
#undef _mm512_reduce_add_ps
#define _mm512_reduce_add_ps DEEPINFER_EMU(mm512_reduce_add_ps)
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps DEEPINFER_EMU(mm512_reduce_max_ps)
#undef _mm512_stream_si512
#define _mm512_stream_si512 DEEPINFER_EMU(mm512_stream_si512)
