// Indexer scores from fp4 records on integer dot products (Kernels::index_scores_fp4; the byte forms: isa_ops.h).
// Per block of 64 keys the records' codes become key bytes in dwords of 4 dims, transposed so that a register holds
// one dword of 16 keys: vpdpbusd then adds 4 code products of 16 keys per instruction and lane, 64 in all, where
// vdpbf16ps on the unpacked bf16 values adds 32. Each group of 32 dims is summed exactly in int32 and scaled into the
// fp32 dot product, groups in order. No bf16 key buffer is written: the records are read directly.
#include "backend/cpu/x86/avx512/avx512_intrinsics.h"

#include <cstdint>

#include "backend/cpu/x86/avx512/avx512_common.h"
#include "backend/cpu/x86/isa_ops.h"

namespace deepinfer::backend::cpu::avx512 {
namespace {

constexpr int kBlock = 64;  // keys per transposed block (the bf16 index_scores' block)

// Up to 16 keys' records (keys >= valid read as code 0, scale 0) -> kt[c * kBlock + lane] = the key bytes of dims
// 4c..4c+3 of key `lane` (c < dim / 4), ks[g * kBlock + lane] = its group scale.
void prepare_keys(const uint8_t* const* records, int valid, int dim, uint32_t* kt, float* ks) {
    // vpmultishiftqb takes 8 bits from each nibble's offset (the next nibble's low bits above it); vpermb reads the
    // low 6 of them, so the 16-entry table repeated 4 times maps every such byte to its nibble's key byte.
    const auto* biased = reinterpret_cast<const __m128i*>(tables::kE2M1Biased.v);
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(biased));
    // per qword (two dwords of 8 codes): the offsets of nibbles 0-3 (first quad) and 4-7 (second) of each dword
    const __m512i first = _mm512_set1_epi64(0x2c2824200c080400LL), second = _mm512_set1_epi64(0x3c3834301c181410LL);
    const int dwords = dim / 8;
    for (int d0 = 0; d0 < dwords; d0 += 16) {
        const int take = dwords - d0 < 16 ? dwords - d0 : 16;
        const __mmask16 mask = lane_mask(take);
        __m512i r[16];
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k)
            r[k] = k < valid ? _mm512_maskz_loadu_epi32(mask, records[k] + 4 * d0) : _mm512_setzero_si512();
        transpose16(r);  // r[c]: dword d0 + c (dims 8(d0 + c) .. + 7) of the 16 keys
        for (int c = 0; c < take; ++c) {
            uint32_t* out = kt + static_cast<int64_t>(2 * (d0 + c)) * kBlock;
            const __m512i lo = _mm512_multishift_epi64_epi8(first, r[c]);
            const __m512i hi = _mm512_multishift_epi64_epi8(second, r[c]);
            _mm512_store_si512(out, _mm512_permutexvar_epi8(lo, table));
            _mm512_store_si512(out + kBlock, _mm512_permutexvar_epi8(hi, table));
        }
    }
    for (int g = 0; g < dim / 32; ++g)
        for (int k = 0; k < 16; ++k) ks[g * kBlock + k] = k < valid ? e8m0_to_float(records[k][dim / 2 + g]) : 0.0f;
}

// dot[a][s] = the fp32 dot products of query heads q + a x head_bytes (a < NH) with the block's keys 16s..16s+15.
template <int NH>
inline void head_dots(const uint32_t* kt, const float* ks, const uint8_t* q, size_t head_bytes, int dim,
                      __m512 (&dot)[NH][4]) {
    const int groups = dim / 32;
#pragma GCC unroll 16
    for (int a = 0; a < NH; ++a)
#pragma GCC unroll 16
        for (int s = 0; s < 4; ++s) dot[a][s] = _mm512_setzero_ps();
    for (int g = 0; g < groups; ++g) {
        __m512i acc[NH][4];
#pragma GCC unroll 16
        for (int a = 0; a < NH; ++a) {
            int32_t bias;
            __builtin_memcpy(&bias, q + a * head_bytes + dim + 4 * g, 4);
#pragma GCC unroll 16
            for (int s = 0; s < 4; ++s) acc[a][s] = _mm512_set1_epi32(bias);
        }
#pragma GCC unroll 8
        for (int c = 8 * g; c < 8 * g + 8; ++c) {
            const uint32_t* kc = kt + static_cast<int64_t>(c) * kBlock;
            const __m512i k0 = _mm512_load_si512(kc), k1 = _mm512_load_si512(kc + 16);
            const __m512i k2 = _mm512_load_si512(kc + 32), k3 = _mm512_load_si512(kc + 48);
#pragma GCC unroll 16
            for (int a = 0; a < NH; ++a) {
                const auto* quad = reinterpret_cast<const int32_t*>(q + a * head_bytes + 4 * c);
                acc[a][0] = dpbusd_bcast(acc[a][0], k0, quad);
                acc[a][1] = dpbusd_bcast(acc[a][1], k1, quad);
                acc[a][2] = dpbusd_bcast(acc[a][2], k2, quad);
                acc[a][3] = dpbusd_bcast(acc[a][3], k3, quad);
            }
        }
        // group sum x key scale x query scale / 4: an exact product (both scales powers of two) added in fp32
#pragma GCC unroll 16
        for (int a = 0; a < NH; ++a) {
            float scale;
            __builtin_memcpy(&scale, q + a * head_bytes + dim + 4 * groups + 4 * g, 4);
            const __m512 qs = _mm512_set1_ps(scale);
#pragma GCC unroll 16
            for (int s = 0; s < 4; ++s)
                dot[a][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[a][s]),
                                            _mm512_mul_ps(_mm512_load_ps(ks + g * kBlock + 16 * s), qs), dot[a][s]);
        }
    }
}

}  // namespace

void index_scores_fp4(const IndexScoresFp4Task& t) {
    const int dim = t.dim;
    const size_t head_bytes = fp4_query_head_bytes(dim);
    uint8_t* mem = align64(t.scratch);
    auto* kt = reinterpret_cast<uint32_t*>(mem);                                           // [dim / 4][64]
    auto* ks = reinterpret_cast<float*>(mem + static_cast<size_t>(dim / 4) * kBlock * 4);  // [dim / 32][64]
    const auto* wts = reinterpret_cast<const uint16_t*>(t.w);
    for (int64_t j0 = t.j0; j0 < t.j1; j0 += kBlock) {
        const int bn = t.j1 - j0 < kBlock ? static_cast<int>(t.j1 - j0) : kBlock;
        for (int s = 0; s < 4; ++s) {
            const int valid = bn - 16 * s < 0 ? 0 : (bn - 16 * s > 16 ? 16 : bn - 16 * s);
            prepare_keys(t.keys + j0 + 16 * s, valid, dim, kt + 16 * s, ks + 16 * s);
        }
        for (int64_t i = t.i0; i < t.i1; ++i) {
            const uint8_t* qi = t.q + static_cast<size_t>(i) * t.heads * head_bytes;
            __m512 total[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            int h = 0;
            for (; h + 2 <= t.heads; h += 2) {
                __m512 dot[2][4];
                head_dots<2>(kt, ks, qi + h * head_bytes, head_bytes, dim, dot);
                add_head_scores(total, dot[0], wts[i * t.heads + h]);  // heads in order
                add_head_scores(total, dot[1], wts[i * t.heads + h + 1]);
            }
            if (h < t.heads) {
                __m512 dot[1][4];
                head_dots<1>(kt, ks, qi + h * head_bytes, head_bytes, dim, dot);
                add_head_scores(total, dot[0], wts[i * t.heads + h]);
            }
#pragma GCC unroll 16
            for (int s = 0; s < 4; ++s) {
                const int valid = bn - 16 * s;
                if (valid <= 0) break;
                _mm512_mask_storeu_ps(t.out + i * t.ldo + j0 + 16 * s, lane_mask(valid), round_bf16(total[s]));
            }
        }
    }
}

}  // namespace deepinfer::backend::cpu::avx512
