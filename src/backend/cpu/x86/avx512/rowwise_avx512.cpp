// AVX-512 row-wise ops (Kernels::rms_norm ... gather_fp8_rows, unpack_records). Everything but exp() is the scalar
// reference's fp32 operation sequence (separate multiplies and adds, the reference's summation orders), so
// those results match it bit for bit; the exp-based ops (SwiGLU, pair pooling, Sinkhorn) use exp_ps
// (about 1 ulp) where the reference calls expf. Tails are masked, so no access leaves the rows.
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

// Whole vectors use plain loads / stores (the masked forms measured slower there); tails are masked.
inline __m512 load_bf16(const bf16* p, __mmask16 m) {
    return from_bf16(m == 0xffff ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(m, p));
}
inline void store_bf16(bf16* p, __m512 v, __mmask16 m) {
    if (m == 0xffff) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16(v));
    else _mm256_mask_storeu_epi16(p, m, to_bf16(v));
}
inline __mmask16 tail_mask(int64_t left) { return lane_mask(left); }
inline __m512 neg(__m512 v) { return _mm512_xor_ps(v, _mm512_set1_ps(-0.0f)); }

}  // namespace

void rms_norm_rows(const bf16* x, int dim, const bf16* w, float eps, bf16* y, int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
        const bf16* xi = x + i * dim;
        __m512 acc = _mm512_setzero_ps();  // lane l sums the squares of columns k = l mod 16
        for (int k = 0; k < dim; k += 16) {
            const __m512 v = load_bf16(xi + k, tail_mask(dim - k));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v));
        }
        // halving: lanes (i, i + 8), (i, i + 4), (i, i + 2), (i, i + 1)
        const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
        const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        const float sum = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
        const float r = 1.0f / __builtin_sqrtf(sum / static_cast<float>(dim) + eps);
        const __m512 rv = _mm512_set1_ps(r);
        for (int k = 0; k < dim; k += 16) {
            const __mmask16 m = tail_mask(dim - k);
            const __m512 normed = _mm512_mul_ps(load_bf16(xi + k, m), rv);
            store_bf16(y + i * dim + k, _mm512_mul_ps(load_bf16(w + k, m), normed), m);
        }
    }
}

void swiglu_rows(const bf16* gate, const bf16* up, int inter, float limit, const float* row_weight, bf16* h,
                 int64_t r0, int64_t r1) {
    const __m512 hi = _mm512_set1_ps(limit), lo = _mm512_set1_ps(-limit), one = _mm512_set1_ps(1.0f);
    for (int64_t i = r0; i < r1; ++i) {
        const int64_t base = i * inter;
        for (int k = 0; k < inter; k += 16) {
            const __mmask16 m = tail_mask(inter - k);
            __m512 g = load_bf16(gate + base + k, m), u = load_bf16(up + base + k, m);
            if (limit > 0) {
                // min / max return their second operand on NaN: NaN passes, as through std::clamp / std::min
                u = _mm512_min_ps(hi, _mm512_max_ps(lo, u));
                g = _mm512_min_ps(hi, g);
            }
            __m512 v = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, exp_ps(neg(g)))), u);
            if (row_weight) v = _mm512_mul_ps(_mm512_set1_ps(row_weight[i]), v);
            store_bf16(h + base + k, v, m);
        }
    }
}

void rope(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin, bool inverse) {
    // Per lane pair (2i, 2i + 1): x * (c, c) + swap(x) * (-s, s) is (re c - im s, im c + re s) exactly.
    alignas(64) float cc[512], ss[512];
    for (int i = 0; i < rope_dim / 2; ++i) {
        const float s = inverse ? -sin[i] : sin[i];
        cc[2 * i] = cc[2 * i + 1] = cos[i];
        ss[2 * i] = -s;
        ss[2 * i + 1] = s;
    }
    for (int64_t v = 0; v < count; ++v) {
        bf16* p = x + v * stride;
        for (int k = 0; k < rope_dim; k += 16) {
            const __mmask16 m = tail_mask(rope_dim - k);
            const __m512 xv = load_bf16(p + k, m);
            const __m512 sw = _mm512_permute_ps(xv, 0xb1);
            const __m512 out = _mm512_add_ps(_mm512_mul_ps(xv, _mm512_load_ps(cc + k)),
                                             _mm512_mul_ps(sw, _mm512_load_ps(ss + k)));
            store_bf16(p + k, out, m);
        }
    }
}

void pair_pool(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out) {
    for (int k = 0; k < dim; k += 16) {
        const __mmask16 m = tail_mask(dim - k);
        const __m512 a = _mm512_maskz_loadu_ps(m, g0 + k), b = _mm512_maskz_loadu_ps(m, g1 + k);
        const __m512 mx = _mm512_max_ps(b, a);  // std::max(a, b): a unless a < b
        const __m512 e0 = exp_ps(_mm512_sub_ps(a, mx)), e1 = exp_ps(_mm512_sub_ps(b, mx));
        const __m512 sum = _mm512_add_ps(e0, e1);
        const __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, u0 + k), _mm512_div_ps(e0, sum)),
                                       _mm512_mul_ps(_mm512_maskz_loadu_ps(m, u1 + k), _mm512_div_ps(e1, sum)));
        store_bf16(out + k, v, m);
    }
}

namespace {

// The Sinkhorn's vector widths: 16 rows per zmm, or up to 8 (a decode step's one row) per ymm at about half the
// cost. Every operation is the same lane by lane, so a row's bits do not depend on the width or its lane.
struct Zmm {
    using V = __m512;
    static constexpr int kLanes = 16;
    static V set1(float v) { return _mm512_set1_ps(v); }
    static V zero() { return _mm512_setzero_ps(); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V div(V a, V b) { return _mm512_div_ps(a, b); }
    static V max(V a, V b) { return _mm512_max_ps(a, b); }
    static V neg(V v) { return _mm512_xor_ps(v, _mm512_set1_ps(-0.0f)); }
    static V exp(V v) { return exp_ps(v); }
    // element j of rows [0, rows) of a row-major [*, mix] array at base
    static V gather(const float* base, int mix, int rows) {
        const __m512i offsets = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(mix));
        return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lane_mask(rows), offsets, base, 4);
    }
    static void store(float* p, V v) { _mm512_store_ps(p, v); }
};
struct Ymm {
    using V = __m256;
    static constexpr int kLanes = 8;
    static V set1(float v) { return _mm256_set1_ps(v); }
    static V zero() { return _mm256_setzero_ps(); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V div(V a, V b) { return _mm256_div_ps(a, b); }
    static V max(V a, V b) { return _mm256_max_ps(a, b); }
    static V neg(V v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }
    static V exp(V v) { return exp_ps8(v); }
    static V gather(const float* base, int mix, int rows) {
        const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(mix));
        return _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), static_cast<__mmask8>(lane_mask(rows)), offsets, base, 4);
    }
    static void store(float* p, V v) { _mm256_store_ps(p, v); }
};

// Rows [r, r + rows) (rows <= W::kLanes), one per lane: every step of the reference's per-row sequence at once.
template <class W>
void sinkhorn_group(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps, float* pre,
                    float* post, float* comb, int64_t r, int rows) {
    using V = typename W::V;
    const int mix = (2 + hc) * hc;
    const V one = W::set1(1.0f), two = W::set1(2.0f), ev = W::set1(eps);
    const V s0 = W::set1(scale[0]), s1 = W::set1(scale[1]), s2 = W::set1(scale[2]);
    V C[kMaxSimdHc * kMaxSimdHc];
    alignas(64) float lanes[16];
    auto load_mix = [&](int j) { return W::gather(mixes + r * mix + j, mix, rows); };
    auto store_lanes = [&](V v, float* dst, int per_row, int j) {
        W::store(lanes, v);
        for (int l = 0; l < rows; ++l) dst[(r + l) * per_row + j] = lanes[l];
    };
    for (int c = 0; c < hc; ++c) {
        const V zp = W::add(W::mul(load_mix(c), s0), W::set1(base[c]));
        const V zq = W::add(W::mul(load_mix(hc + c), s1), W::set1(base[hc + c]));
        store_lanes(W::add(W::div(one, W::add(one, W::exp(W::neg(zp)))), ev), pre, hc, c);
        store_lanes(W::mul(two, W::div(one, W::add(one, W::exp(W::neg(zq))))), post, hc, c);
    }
    for (int i = 0; i < hc * hc; ++i) C[i] = W::add(W::mul(load_mix(2 * hc + i), s2), W::set1(base[2 * hc + i]));
    for (int i = 0; i < hc; ++i) {  // row softmax + eps
        V mx = C[i * hc];
        for (int j = 1; j < hc; ++j) mx = W::max(C[i * hc + j], mx);  // std::max(mx, c): mx unless mx < c
        V sum = W::zero();
        for (int j = 0; j < hc; ++j) {
            C[i * hc + j] = W::exp(W::sub(C[i * hc + j], mx));
            sum = W::add(sum, C[i * hc + j]);
        }
        for (int j = 0; j < hc; ++j) C[i * hc + j] = W::add(W::div(C[i * hc + j], sum), ev);
    }
    auto normalize_columns = [&] {
        for (int j = 0; j < hc; ++j) {
            V sum = W::zero();
            for (int i = 0; i < hc; ++i) sum = W::add(sum, C[i * hc + j]);
            const V d = W::add(sum, ev);
            for (int i = 0; i < hc; ++i) C[i * hc + j] = W::div(C[i * hc + j], d);
        }
    };
    auto normalize_rows = [&] {
        for (int i = 0; i < hc; ++i) {
            V sum = W::zero();
            for (int j = 0; j < hc; ++j) sum = W::add(sum, C[i * hc + j]);
            const V d = W::add(sum, ev);
            for (int j = 0; j < hc; ++j) C[i * hc + j] = W::div(C[i * hc + j], d);
        }
    };
    normalize_columns();
    for (int it = 0; it < iters - 1; ++it) {
        normalize_rows();
        normalize_columns();
    }
    for (int i = 0; i < hc * hc; ++i) store_lanes(C[i], comb, hc * hc, i);
}

}  // namespace

void hc_sinkhorn_rows(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps,
                      float* pre, float* post, float* comb, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r += 16) {
        const int rows = static_cast<int>(r1 - r < 16 ? r1 - r : 16);
        if (rows <= Ymm::kLanes) sinkhorn_group<Ymm>(mixes, scale, base, hc, iters, eps, pre, post, comb, r, rows);
        else sinkhorn_group<Zmm>(mixes, scale, base, hc, iters, eps, pre, post, comb, r, rows);
    }
}

void hc_collapse_rows(const bf16* x, const float* pre, int hc, int dim, bf16* y, int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
        for (int k = 0; k < dim; k += 16) {
            const __mmask16 m = tail_mask(dim - k);
            __m512 sum = _mm512_setzero_ps();
            for (int c = 0; c < hc; ++c)
                sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_set1_ps(pre[i * hc + c]),
                                                       load_bf16(x + (i * hc + c) * dim + k, m)));
            store_bf16(y + i * dim + k, sum, m);
        }
}

void hc_expand_rows(const bf16* o, const bf16* res, const float* post, const float* comb, int hc, int dim, bf16* out,
                    int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
        for (int k = 0; k < dim; k += 16) {
            const __mmask16 m = tail_mask(dim - k);
            const __m512 ov = load_bf16(o + i * dim + k, m);
            __m512 rv[kMaxSimdHc];  // the copies' columns, loaded once when they fit
            const bool cached = hc <= kMaxSimdHc;
            for (int c = 0; cached && c < hc; ++c) rv[c] = load_bf16(res + (i * hc + c) * dim + k, m);
            for (int j = 0; j < hc; ++j) {
                __m512 mixed = _mm512_setzero_ps();
                for (int c = 0; c < hc; ++c) {
                    const __m512 rc = cached ? rv[c] : load_bf16(res + (i * hc + c) * dim + k, m);
                    mixed = _mm512_add_ps(mixed, _mm512_mul_ps(_mm512_set1_ps(comb[(i * hc + c) * hc + j]), rc));
                }
                const __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(post[i * hc + j]), ov), mixed);
                store_bf16(out + (i * hc + j) * dim + k, v, m);
            }
        }
}

void order_keys(const float* scores, int64_t n, uint32_t* keys) {
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 m = tail_mask(n - j);
        const __m512 v = _mm512_maskz_loadu_ps(m, scores + j);
        const __m512i u = _mm512_castps_si512(v);
        // positive: u | sign; negative: ~u (u xor all ones); -0 like +0; NaN above everything
        __m512i key = _mm512_xor_si512(u, _mm512_or_si512(_mm512_srai_epi32(u, 31), sign));
        key = _mm512_mask_mov_epi32(key, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_EQ_OQ), sign);
        key = _mm512_mask_mov_epi32(key, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(-1));
        _mm512_mask_storeu_epi32(keys + j, m, key);
    }
}

int64_t select_entries(const uint32_t* keys, int64_t n, uint32_t threshold, int64_t ties, int32_t* out) {
    const __m512i t = _mm512_set1_epi32(static_cast<int>(threshold));
    __m512i idx = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i step = _mm512_set1_epi32(16);
    int64_t count = 0;
    for (int64_t j = 0; j < n; j += 16, idx = _mm512_add_epi32(idx, step)) {
        const __mmask16 m = tail_mask(n - j);
        const __m512i key = _mm512_maskz_loadu_epi32(m, keys + j);
        const __mmask16 above = _mm512_mask_cmpgt_epu32_mask(m, key, t);
        uint32_t equal = _mm512_mask_cmpeq_epi32_mask(m, key, t);
        const int eq = __builtin_popcount(equal);
        if (eq > ties) equal = _pdep_u32((1u << ties) - 1u, equal);  // the lowest `ties` of them
        ties -= eq > ties ? ties : eq;
        const __mmask16 take = static_cast<__mmask16>(above | equal);
        const int got = __builtin_popcount(take);
        // compress in a register, then a masked store (a compressing store to memory is slow on Zen 4)
        _mm512_mask_storeu_epi32(out + count, static_cast<__mmask16>((1u << got) - 1u),
                                 _mm512_maskz_compress_epi32(take, idx));
        count += got;
    }
    return count;
}

namespace {

// 32 e4m3 codes' bf16 words (Fp8ToBf16's lookups: every e4m3 value is a bf16 value) times the e8m0 scale `code`,
// rounded as float_to_bf16: for codes kPlainE8m0Min..Max (x86_tables.h) the exponent moved (zeros and NaNs as they
// are), else the words widened, multiplied in fp32 and rounded; a NaN scale makes the 32 that NaN.
inline void scale_fp8_words(__m512i w, uint8_t code, bf16* out) {
    if (code >= tables::kPlainE8m0Min && code <= tables::kPlainE8m0Max) [[likely]] {
        const __m512i mag = _mm512_and_si512(w, _mm512_set1_epi16(0x7fff));
        // 1 <= mag <= 0x7f7f: nonzero and finite (the lookups give NaN codes 0x7fc0)
        const __mmask32 moves = _mm512_cmplt_epu16_mask(_mm512_sub_epi16(mag, _mm512_set1_epi16(1)),
                                                        _mm512_set1_epi16(0x7f7f));
        w = _mm512_mask_add_epi16(w, moves, w, _mm512_set1_epi16(static_cast<int16_t>((code - 127) << 7)));
        _mm512_storeu_si512(out, w);
        return;
    }
    const float scale = e8m0_to_float(code);  // NaN: the group is that NaN (core/quant_records.cpp)
    const __m512 s = _mm512_set1_ps(scale);
    const __m512 lo = from_bf16(_mm512_castsi512_si256(w)), hi = from_bf16(_mm512_extracti64x4_epi64(w, 1));
    store_bf16(out, scale == scale ? _mm512_mul_ps(lo, s) : s, 0xffff);
    store_bf16(out + 16, scale == scale ? _mm512_mul_ps(hi, s) : s, 0xffff);
}

// dim e4m3 codes q times their e8m0 scales s (one per 32) to bf16, out [dim], 64 codes a step.
inline void fp8_values(const uint8_t* q, const uint8_t* s, int dim, bf16* out) {
    const Fp8ToBf16 dec;
    // Fp8ToBf16's unpack order back to element order: lanes (a0 b0 a1 b1) and (a2 b2 a3 b3)
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (int k = 0; k < dim; k += 64) {
        const bool two = k + 64 <= dim;  // (dim % 32 == 0: else the last 32)
        const __m512i codes = _mm512_maskz_loadu_epi8(two ? ~__mmask64{0} : __mmask64{0xffffffff}, q + k);
        __m512i a, b;
        dec.decode(codes, a, b);
        scale_fp8_words(_mm512_permutex2var_epi64(a, first, b), s[k / 32], out + k);
        if (two) scale_fp8_words(_mm512_permutex2var_epi64(a, second, b), s[k / 32 + 1], out + k + 32);
    }
}

// dim e2m1 elements (pairs, low nibble first) times one scale per kGroup of them (the scale byte decoded by
// ScaleOf, as core/quant_records.cpp does) to bf16, out [dim], 32 elements a step. A finite scale makes every
// product exact in bf16 (at most 6 significant bits, within range: quant_records.cpp), so its bf16 is the fp32
// product's high half; a step with a NaN scale rounds as float_to_bf16.
template <int kGroup, float (*ScaleOf)(uint8_t)>
inline void e2m1_values(const uint8_t* record, int dim, bf16* out) {
    static_assert(kGroup == 16 || kGroup == 32);
    const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                        -2.0f, -3.0f, -4.0f, -6.0f);
    const __m128i low = _mm_set1_epi8(0x0f);
    // the high halves of two vectors' 32 lanes, in order
    const __m512i high_words = _mm512_setr_epi32(0x00030001, 0x00070005, 0x000b0009, 0x000f000d, 0x00130011,
                                                 0x00170015, 0x001b0019, 0x001f001d, 0x00230021, 0x00270025,
                                                 0x002b0029, 0x002f002d, 0x00330031, 0x00370035, 0x003b0039,
                                                 0x003f003d);
    const uint8_t* scales = record + dim / 2;
    for (int k = 0; k < dim; k += 32) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(record + k / 2));
        const __m128i lo = _mm_and_si128(b, low), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
        const float s0 = ScaleOf(scales[k / kGroup]), s1 = ScaleOf(scales[(k + 16) / kGroup]);
        const __m512 v0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), table),
                                        _mm512_set1_ps(s0));
        const __m512 v1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), table),
                                        _mm512_set1_ps(s1));
        if (s0 == s0 && s1 == s1) [[likely]] {
            _mm512_storeu_si512(out + k, _mm512_permutex2var_epi16(_mm512_castps_si512(v0), high_words,
                                                                   _mm512_castps_si512(v1)));
        } else {
            store_bf16(out + k, v0, 0xffff);
            store_bf16(out + k + 16, v1, 0xffff);
        }
    }
}

}  // namespace

void gather_fp8_rows(const uint8_t* codes, const uint8_t* scales, int dim, const int64_t* rows, bf16* out, int64_t r0,
                     int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
        fp8_values(codes + rows[i] * dim, scales + rows[i] * (dim / 32), dim, out + i * dim);
}

void unpack_records_rows(CacheRecord kind, const uint8_t* const* records, int dim, bf16* out, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* record = records[r];
        switch (kind) {
            case CacheRecord::kWindow: fp8_values(record, record + dim, dim, out + r * dim); break;
            case CacheRecord::kCompressed: e2m1_values<16, e4m3_to_float>(record, dim, out + r * dim); break;
            case CacheRecord::kIndexKey: e2m1_values<32, e8m0_to_float>(record, dim, out + r * dim); break;
        }
    }
}

}  // namespace deepinfer::backend::cpu::avx512
