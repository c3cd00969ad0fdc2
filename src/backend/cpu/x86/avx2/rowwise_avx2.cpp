// AVX2 row-wise ops (Kernels::rms_norm ... gather_fp8_rows, unpack_records), the AVX-512 file's algorithms on 8 lanes:
// the scalar reference's fp32 operation sequence except exp() (exp_ps, about 1 ulp). RMSNorm keeps the
// reference's 16 partial sums as two 8-lane accumulators. Tails go through small zero-padded buffers or
// masked loads, so no access leaves the rows.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/x86/avx2/avx2_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx2 {
namespace {

inline __m256i lane_mask(int64_t left) {
    const int n = static_cast<int>(left < 8 ? left : 8);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// 8 bf16 (fewer at a tail, the rest read as 0) -> fp32.
inline __m256 load_bf16_n(const bf16* p, int64_t left) {
    if (left >= 8) return load_bf16(reinterpret_cast<const uint16_t*>(p));
    alignas(16) uint16_t t[8] = {};
    __builtin_memcpy(t, p, static_cast<size_t>(left) * 2);
    return load_bf16(t);
}
inline void store_bf16_n(bf16* p, __m256 v, int64_t left) {
    const __m128i b = to_bf16(v);
    if (left >= 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), b);
        return;
    }
    alignas(16) uint16_t t[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(t), b);
    __builtin_memcpy(p, t, static_cast<size_t>(left) * 2);
}
inline __m256 load_f32_n(const float* p, int64_t left) {
    return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(left));
}
inline __m256 neg(__m256 v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }

}  // namespace

void rms_norm_rows(const bf16* x, int dim, const bf16* w, float eps, bf16* y, int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
        const bf16* xi = x + i * dim;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();  // lanes 0-7 and 8-15 of k mod 16
        for (int k = 0; k < dim; k += 16) {
            const __m256 a = load_bf16_n(xi + k, dim - k);
            const __m256 b = k + 8 < dim ? load_bf16_n(xi + k + 8, dim - k - 8) : _mm256_setzero_ps();
            acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(a, a));
            acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(b, b));
        }
        const __m256 s8 = _mm256_add_ps(acc0, acc1);
        const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        const float sum = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
        const float r = 1.0f / __builtin_sqrtf(sum / static_cast<float>(dim) + eps);
        const __m256 rv = _mm256_set1_ps(r);
        for (int k = 0; k < dim; k += 8) {
            const __m256 normed = _mm256_mul_ps(load_bf16_n(xi + k, dim - k), rv);
            store_bf16_n(y + i * dim + k, _mm256_mul_ps(load_bf16_n(w + k, dim - k), normed), dim - k);
        }
    }
}

void swiglu_rows(const bf16* gate, const bf16* up, int inter, float limit, const float* row_weight, bf16* h,
                 int64_t r0, int64_t r1) {
    const __m256 hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit), one = _mm256_set1_ps(1.0f);
    for (int64_t i = r0; i < r1; ++i) {
        const int64_t base = i * inter;
        for (int k = 0; k < inter; k += 8) {
            __m256 g = load_bf16_n(gate + base + k, inter - k), u = load_bf16_n(up + base + k, inter - k);
            if (limit > 0) {
                u = _mm256_min_ps(hi, _mm256_max_ps(lo, u));  // NaN passes (second operand), as std::clamp
                g = _mm256_min_ps(hi, g);
            }
            __m256 v = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp_ps(neg(g)))), u);
            if (row_weight) v = _mm256_mul_ps(_mm256_set1_ps(row_weight[i]), v);
            store_bf16_n(h + base + k, v, inter - k);
        }
    }
}

void rope(bf16* x, int64_t count, int64_t stride, int rope_dim, const float* cos, const float* sin, bool inverse) {
    alignas(32) float cc[512], ss[512];  // per lane pair: (c, c) and (-s, s), as the AVX-512 file
    for (int i = 0; i < rope_dim / 2; ++i) {
        const float s = inverse ? -sin[i] : sin[i];
        cc[2 * i] = cc[2 * i + 1] = cos[i];
        ss[2 * i] = -s;
        ss[2 * i + 1] = s;
    }
    for (int64_t v = 0; v < count; ++v) {
        bf16* p = x + v * stride;
        for (int k = 0; k < rope_dim; k += 8) {
            const __m256 xv = load_bf16_n(p + k, rope_dim - k);
            const __m256 sw = _mm256_permute_ps(xv, 0xb1);
            const __m256 out =
                _mm256_add_ps(_mm256_mul_ps(xv, _mm256_load_ps(cc + k)), _mm256_mul_ps(sw, _mm256_load_ps(ss + k)));
            store_bf16_n(p + k, out, rope_dim - k);
        }
    }
}

void pair_pool(const float* u0, const float* g0, const float* u1, const float* g1, int dim, bf16* out) {
    for (int k = 0; k < dim; k += 8) {
        const __m256 a = load_f32_n(g0 + k, dim - k), b = load_f32_n(g1 + k, dim - k);
        const __m256 mx = _mm256_max_ps(b, a);  // std::max(a, b)
        const __m256 e0 = exp_ps(_mm256_sub_ps(a, mx)), e1 = exp_ps(_mm256_sub_ps(b, mx));
        const __m256 sum = _mm256_add_ps(e0, e1);
        const __m256 v = _mm256_add_ps(_mm256_mul_ps(load_f32_n(u0 + k, dim - k), _mm256_div_ps(e0, sum)),
                                       _mm256_mul_ps(load_f32_n(u1 + k, dim - k), _mm256_div_ps(e1, sum)));
        store_bf16_n(out + k, v, dim - k);
    }
}

void hc_sinkhorn_rows(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps,
                      float* pre, float* post, float* comb, int64_t r0, int64_t r1) {
    // 8 rows at a time, one per lane.
    const int mix = (2 + hc) * hc;
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f), ev = _mm256_set1_ps(eps);
    const __m256 s0 = _mm256_set1_ps(scale[0]), s1 = _mm256_set1_ps(scale[1]), s2 = _mm256_set1_ps(scale[2]);
    const __m256i row_offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(mix));
    __m256 C[kMaxSimdHc * kMaxSimdHc];
    alignas(32) float lanes[8];
    for (int64_t r = r0; r < r1; r += 8) {
        const int rows = static_cast<int>(r1 - r < 8 ? r1 - r : 8);
        const __m256 m = _mm256_castsi256_ps(lane_mask(rows));
        auto load_mix = [&](int j) {
            return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), mixes + r * mix + j, row_offsets, m, 4);
        };
        auto store_lanes = [&](__m256 v, float* dst, int per_row, int j) {
            _mm256_store_ps(lanes, v);
            for (int l = 0; l < rows; ++l) dst[(r + l) * per_row + j] = lanes[l];
        };
        for (int c = 0; c < hc; ++c) {
            const __m256 zp = _mm256_add_ps(_mm256_mul_ps(load_mix(c), s0), _mm256_set1_ps(base[c]));
            const __m256 zq = _mm256_add_ps(_mm256_mul_ps(load_mix(hc + c), s1), _mm256_set1_ps(base[hc + c]));
            store_lanes(_mm256_add_ps(_mm256_div_ps(one, _mm256_add_ps(one, exp_ps(neg(zp)))), ev), pre, hc, c);
            store_lanes(_mm256_mul_ps(two, _mm256_div_ps(one, _mm256_add_ps(one, exp_ps(neg(zq))))), post, hc, c);
        }
        for (int i = 0; i < hc * hc; ++i)
            C[i] = _mm256_add_ps(_mm256_mul_ps(load_mix(2 * hc + i), s2), _mm256_set1_ps(base[2 * hc + i]));
        for (int i = 0; i < hc; ++i) {
            __m256 mx = C[i * hc];
            for (int j = 1; j < hc; ++j) mx = _mm256_max_ps(C[i * hc + j], mx);
            __m256 sum = _mm256_setzero_ps();
            for (int j = 0; j < hc; ++j) {
                C[i * hc + j] = exp_ps(_mm256_sub_ps(C[i * hc + j], mx));
                sum = _mm256_add_ps(sum, C[i * hc + j]);
            }
            for (int j = 0; j < hc; ++j) C[i * hc + j] = _mm256_add_ps(_mm256_div_ps(C[i * hc + j], sum), ev);
        }
        auto normalize_columns = [&] {
            for (int j = 0; j < hc; ++j) {
                __m256 sum = _mm256_setzero_ps();
                for (int i = 0; i < hc; ++i) sum = _mm256_add_ps(sum, C[i * hc + j]);
                const __m256 d = _mm256_add_ps(sum, ev);
                for (int i = 0; i < hc; ++i) C[i * hc + j] = _mm256_div_ps(C[i * hc + j], d);
            }
        };
        auto normalize_rows = [&] {
            for (int i = 0; i < hc; ++i) {
                __m256 sum = _mm256_setzero_ps();
                for (int j = 0; j < hc; ++j) sum = _mm256_add_ps(sum, C[i * hc + j]);
                const __m256 d = _mm256_add_ps(sum, ev);
                for (int j = 0; j < hc; ++j) C[i * hc + j] = _mm256_div_ps(C[i * hc + j], d);
            }
        };
        normalize_columns();
        for (int it = 0; it < iters - 1; ++it) {
            normalize_rows();
            normalize_columns();
        }
        for (int i = 0; i < hc * hc; ++i) store_lanes(C[i], comb, hc * hc, i);
    }
}

void hc_collapse_rows(const bf16* x, const float* pre, int hc, int dim, bf16* y, int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
        for (int k = 0; k < dim; k += 8) {
            __m256 sum = _mm256_setzero_ps();
            for (int c = 0; c < hc; ++c)
                sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_set1_ps(pre[i * hc + c]),
                                                       load_bf16_n(x + (i * hc + c) * dim + k, dim - k)));
            store_bf16_n(y + i * dim + k, sum, dim - k);
        }
}

void hc_expand_rows(const bf16* o, const bf16* res, const float* post, const float* comb, int hc, int dim, bf16* out,
                    int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
        for (int k = 0; k < dim; k += 8) {
            const __m256 ov = load_bf16_n(o + i * dim + k, dim - k);
            __m256 rv[kMaxSimdHc];
            const bool cached = hc <= kMaxSimdHc;
            for (int c = 0; cached && c < hc; ++c) rv[c] = load_bf16_n(res + (i * hc + c) * dim + k, dim - k);
            for (int j = 0; j < hc; ++j) {
                __m256 mixed = _mm256_setzero_ps();
                for (int c = 0; c < hc; ++c) {
                    const __m256 rc = cached ? rv[c] : load_bf16_n(res + (i * hc + c) * dim + k, dim - k);
                    mixed = _mm256_add_ps(mixed, _mm256_mul_ps(_mm256_set1_ps(comb[(i * hc + c) * hc + j]), rc));
                }
                const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(post[i * hc + j]), ov), mixed);
                store_bf16_n(out + (i * hc + j) * dim + k, v, dim - k);
            }
        }
}

void order_keys(const float* scores, int64_t n, uint32_t* keys) {
    const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    for (int64_t j = 0; j < n; j += 8) {
        const __m256i m = lane_mask(n - j);
        const __m256 v = _mm256_maskload_ps(scores + j, m);
        const __m256i u = _mm256_castps_si256(v);
        __m256i key = _mm256_xor_si256(u, _mm256_or_si256(_mm256_srai_epi32(u, 31), sign));
        key = _mm256_blendv_epi8(key, sign, _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_EQ_OQ)));
        key = _mm256_blendv_epi8(key, _mm256_set1_epi32(-1), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        _mm256_maskstore_epi32(reinterpret_cast<int*>(keys + j), m, key);
    }
}

int64_t select_entries(const uint32_t* keys, int64_t n, uint32_t threshold, int64_t ties, int32_t* out) {
    // unsigned compare as signed after flipping the sign bits
    const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    const __m256i t = _mm256_set1_epi32(static_cast<int>(threshold));
    const __m256i t_flipped = _mm256_xor_si256(t, flip);
    int64_t count = 0;
    for (int64_t j = 0; j < n; j += 8) {
        const __m256i m = lane_mask(n - j);
        const uint32_t valid = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(m)));
        const __m256i key = _mm256_maskload_epi32(reinterpret_cast<const int*>(keys + j), m);
        const uint32_t above = valid & static_cast<uint32_t>(_mm256_movemask_ps(
                                           _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_xor_si256(key, flip), t_flipped))));
        uint32_t equal =
            valid & static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(key, t))));
        const int eq = __builtin_popcount(equal);
        if (eq > ties) equal = _pdep_u32((1u << ties) - 1u, equal);  // the lowest `ties` of them
        ties -= eq > ties ? ties : eq;
        for (uint32_t take = above | equal; take != 0; take &= take - 1)
            out[count++] = static_cast<int32_t>(j + __builtin_ctz(take));
    }
    return count;
}

namespace {

// 16 e4m3 codes -> their bf16 words (every e4m3 value is a bf16 value): normal codes by arithmetic (exponent + 120,
// mantissa at bit 4), subnormal ones (m x 2^-9) from an 8-word table (two byte lookups), NaN codes 0x7fc0; then
// the sign.
inline __m256i fp8_words(const uint8_t* q) {
    // m x 2^-9 for m = 0..7 as bf16: the low and the high bytes, in both 128-bit lanes
    const __m256i sub_lo = _mm256_setr_epi8(0, 0, -128, -64, 0, 32, 64, 96, 0, 0, 0, 0, 0, 0, 0, 0,
                                            0, 0, -128, -64, 0, 32, 64, 96, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i sub_hi = _mm256_setr_epi8(0, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0,
                                            0, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi16(0x7f));
    const __m256i normal = _mm256_add_epi16(_mm256_slli_epi16(mag, 4), _mm256_set1_epi16(120 << 7));
    // (a word lane's bytes are mag and 0; entry 0 of both tables is 0)
    const __m256i sub = _mm256_or_si256(_mm256_shuffle_epi8(sub_lo, mag),
                                        _mm256_slli_epi16(_mm256_shuffle_epi8(sub_hi, mag), 8));
    __m256i w = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi16(_mm256_set1_epi16(8), mag));
    w = _mm256_blendv_epi8(w, _mm256_set1_epi16(0x7fc0), _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7f)));
    return _mm256_or_si256(w, _mm256_slli_epi16(_mm256_andnot_si256(mag, c), 8));
}

// 16 bf16 words times the e8m0 scale `code`, rounded as float_to_bf16, as the AVX-512 file's scale_fp8_words.
inline void scale_fp8_words(__m256i w, uint8_t code, bf16* out) {
    if (code >= tables::kPlainE8m0Min && code <= tables::kPlainE8m0Max) [[likely]] {
        const __m256i mag = _mm256_and_si256(w, _mm256_set1_epi16(0x7fff));
        const __m256i moves = _mm256_and_si256(_mm256_cmpgt_epi16(mag, _mm256_setzero_si256()),
                                               _mm256_cmpgt_epi16(_mm256_set1_epi16(0x7f80), mag));
        const __m256i step = _mm256_set1_epi16(static_cast<int16_t>((code - 127) << 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi16(w, _mm256_and_si256(step, moves)));
        return;
    }
    const float scale = e8m0_to_float(code);  // NaN: the group is that NaN (core/quant_records.cpp)
    const __m256 s = _mm256_set1_ps(scale);
    const __m256 lo = from_bf16(_mm256_castsi256_si128(w)), hi = from_bf16(_mm256_extracti128_si256(w, 1));
    store_bf16_n(out, scale == scale ? _mm256_mul_ps(lo, s) : s, 8);
    store_bf16_n(out + 8, scale == scale ? _mm256_mul_ps(hi, s) : s, 8);
}

// dim e4m3 codes q times their e8m0 scales s (one per 32) to bf16, out [dim].
inline void fp8_values(const uint8_t* q, const uint8_t* s, int dim, bf16* out) {
    for (int k = 0; k < dim; k += 16) scale_fp8_words(fp8_words(q + k), s[k / 32], out + k);
}

// dim e2m1 elements times one scale per kGroup of them to bf16, as the AVX-512 file (a finite scale's products
// are exact in bf16: their high halves; a NaN scale's round as float_to_bf16), 8 elements a vector: the magnitude
// from an 8-entry table (vpermps reads the index's low 3 bits), the sign from its bit 3.
template <int kGroup, float (*ScaleOf)(uint8_t)>
inline void e2m1_values(const uint8_t* record, int dim, bf16* out) {
    static_assert(kGroup == 16 || kGroup == 32);
    const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    const __m128i low = _mm_set1_epi8(0x0f);
    auto values = [&](__m128i nibbles) {  // the low 8 bytes' nibble codes -> fp32
        const __m256i idx = _mm256_cvtepu8_epi32(nibbles);
        return _mm256_or_ps(_mm256_permutevar8x32_ps(magnitudes, idx),
                            _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(idx, 28), sign)));
    };
    // the high halves of 8 + 8 lanes, in order
    auto high_halves = [](__m256 a, __m256 b) {
        const __m256i packed = _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(a), 16),
                                                   _mm256_srli_epi32(_mm256_castps_si256(b), 16));
        return _mm256_permute4x64_epi64(packed, 0xd8);
    };
    const uint8_t* scales = record + dim / 2;
    for (int k = 0; k < dim; k += 32) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(record + k / 2));
        const __m128i lo = _mm_and_si128(b, low), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
        const __m128i n0 = _mm_unpacklo_epi8(lo, hi), n1 = _mm_unpackhi_epi8(lo, hi);  // elements 0-15, 16-31
        const float s0 = ScaleOf(scales[k / kGroup]), s1 = ScaleOf(scales[(k + 16) / kGroup]);
        const __m256 a0 = _mm256_mul_ps(values(n0), _mm256_set1_ps(s0));
        const __m256 a1 = _mm256_mul_ps(values(_mm_srli_si128(n0, 8)), _mm256_set1_ps(s0));
        const __m256 a2 = _mm256_mul_ps(values(n1), _mm256_set1_ps(s1));
        const __m256 a3 = _mm256_mul_ps(values(_mm_srli_si128(n1, 8)), _mm256_set1_ps(s1));
        if (s0 == s0 && s1 == s1) [[likely]] {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), high_halves(a0, a1));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k + 16), high_halves(a2, a3));
        } else {
            store_bf16_n(out + k, a0, 8);
            store_bf16_n(out + k + 8, a1, 8);
            store_bf16_n(out + k + 16, a2, 8);
            store_bf16_n(out + k + 24, a3, 8);
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

}  // namespace deepinfer::backend::cpu::avx2
