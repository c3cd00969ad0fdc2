// Pack / unpack of the exact cache records of spec §6.1.
#include "core/quant_records.h"

#include <array>
#include <bit>

#include "core/check.h"
#include "core/numeric.h"

namespace deepinfer {

void pack_window_record(const float* x, int dim, uint8_t* record, float* qdq) {
    DI_CHECK(dim % kActQuantGroup == 0);
    uint8_t* scales = record + dim;
    for (int g = 0; g < dim / kActQuantGroup; ++g) {
        const float* xg = x + g * kActQuantGroup;
        uint8_t* codes = record + g * kActQuantGroup;
        scales[g] = act_quant_group(xg, codes);
        if (qdq) {
            float s = e8m0_to_float(scales[g]);
            for (int i = 0; i < kActQuantGroup; ++i)
                qdq[g * kActQuantGroup + i] = round_to_bf16(e4m3_to_float(codes[i]) * s);
        }
    }
}

namespace {
void pack_nibbles(const uint8_t* codes, int n, uint8_t* out) {
    for (int i = 0; i < n / 2; ++i) out[i] = static_cast<uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
}
inline uint8_t nibble(const uint8_t* packed, int i) { return (packed[i / 2] >> ((i & 1) * 4)) & 0xf; }
}  // namespace

void pack_compressed_record(const float* x, int dim, uint8_t* record, float* qdq) {
    DI_CHECK(dim % kFp4KvGroup == 0);
    uint8_t* scales = record + dim / 2;
    uint8_t codes[kFp4KvGroup];
    for (int g = 0; g < dim / kFp4KvGroup; ++g) {
        scales[g] = fp4_kv_quant_group(x + g * kFp4KvGroup, codes, qdq ? qdq + g * kFp4KvGroup : nullptr);
        pack_nibbles(codes, kFp4KvGroup, record + g * kFp4KvGroup / 2);
    }
}

void pack_index_key_record(const float* x, int dim, uint8_t* record, float* qdq) {
    DI_CHECK(dim % kFp4IndexGroup == 0);
    uint8_t* scales = record + dim / 2;
    uint8_t codes[kFp4IndexGroup];
    for (int g = 0; g < dim / kFp4IndexGroup; ++g) {
        scales[g] = fp4_index_quant_group(x + g * kFp4IndexGroup, codes, qdq ? qdq + g * kFp4IndexGroup : nullptr);
        pack_nibbles(codes, kFp4IndexGroup, record + g * kFp4IndexGroup / 2);
    }
}

// ---- unpack: every value is bf16(code x scale), computed as the packers' QDQ does (fp32 product, one rounding);
// a decode step unpacks every window record and selected compressed entry of a layer and every index key, so
// the codes go through inlined value tables rather than the general conversions.

namespace {

// e4m3 code -> fp32 for all 256 codes (NaN codes included).
const float* e4m3_values() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i) t[i] = e4m3_to_float(static_cast<uint8_t>(i));
        return t;
    }();
    return table.data();
}

inline float widen(bf16 v, float*) { return bf16_to_float(v); }
inline bf16 widen(bf16 v, bf16*) { return v; }

template <class Out>
void unpack_window(const uint8_t* record, int dim, Out* out) {
    const float* values = e4m3_values();
    const uint8_t* scales = record + dim;
    for (int g = 0; g < dim / kActQuantGroup; ++g) {
        const float s = e8m0_to_float(scales[g]);
        const int k0 = g * kActQuantGroup;
        // A NaN scale (code 255) makes the whole group its NaN: a NaN code times it would give either NaN's sign,
        // as the compiler orders the operands.
        for (int i = 0; i < kActQuantGroup; ++i)
            out[k0 + i] = widen(float_to_bf16(s != s ? s : values[record[k0 + i]] * s), out);
    }
}

// e2m1 code -> value, sign included.
constexpr std::array<float, 16> kE2M1Signed = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// Groups of `group` e2m1 elements (pairs, low nibble first) with one scale each, decoded by scale_value.
// A finite e4m3 or e8m0 scale times an e2m1 value has at most 6 significant bits and stays within bf16's range,
// so the fp32 product is a bf16 value and the rounding reduces to dropping 16 zero bits; a NaN scale takes the
// general rounding (which quiets the NaN).
template <class Out, class ScaleValue>
void unpack_e2m1(const uint8_t* record, int dim, int group, const ScaleValue& scale_value, Out* out) {
    const uint8_t* scales = record + dim / 2;
    for (int g = 0; g < dim / group; ++g) {
        const float s = scale_value(scales[g]);
        const uint8_t* pairs = record + g * group / 2;
        Out* o = out + g * group;
        if (s != s) {
            for (int i = 0; i < group; ++i) o[i] = widen(float_to_bf16(kE2M1Signed[(pairs[i / 2] >> (i % 2 * 4)) & 0xf] * s), out);
            continue;
        }
        for (int i = 0; i < group / 2; ++i) {
            const auto lo = static_cast<uint16_t>(std::bit_cast<uint32_t>(kE2M1Signed[pairs[i] & 0xf] * s) >> 16);
            const auto hi = static_cast<uint16_t>(std::bit_cast<uint32_t>(kE2M1Signed[pairs[i] >> 4] * s) >> 16);
            o[2 * i] = widen(bf16{lo}, out);
            o[2 * i + 1] = widen(bf16{hi}, out);
        }
    }
}

}  // namespace

void unpack_window_record(const uint8_t* record, int dim, float* out) { unpack_window(record, dim, out); }
void unpack_window_record(const uint8_t* record, int dim, bf16* out) { unpack_window(record, dim, out); }

void unpack_compressed_record(const uint8_t* record, int dim, float* out) {
    unpack_e2m1(record, dim, kFp4KvGroup, e4m3_to_float, out);
}
void unpack_compressed_record(const uint8_t* record, int dim, bf16* out) {
    unpack_e2m1(record, dim, kFp4KvGroup, e4m3_to_float, out);
}

void unpack_index_key_record(const uint8_t* record, int dim, float* out) {
    unpack_e2m1(record, dim, kFp4IndexGroup, e8m0_to_float, out);
}
void unpack_index_key_record(const uint8_t* record, int dim, bf16* out) {
    unpack_e2m1(record, dim, kFp4IndexGroup, e8m0_to_float, out);
}

}  // namespace deepinfer
