// Pack / unpack of the exact cache records of spec §6.1.
#include "core/quant_records.h"

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

void unpack_window_record(const uint8_t* record, int dim, float* out) {
    const uint8_t* scales = record + dim;
    for (int g = 0; g < dim / kActQuantGroup; ++g) {
        float s = e8m0_to_float(scales[g]);
        for (int i = 0; i < kActQuantGroup; ++i)
            out[g * kActQuantGroup + i] = round_to_bf16(e4m3_to_float(record[g * kActQuantGroup + i]) * s);
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

void unpack_compressed_record(const uint8_t* record, int dim, float* out) {
    const uint8_t* scales = record + dim / 2;
    for (int g = 0; g < dim / kFp4KvGroup; ++g) {
        float s = e4m3_to_float(scales[g]);
        for (int i = 0; i < kFp4KvGroup; ++i) {
            int k = g * kFp4KvGroup + i;
            out[k] = round_to_bf16(e2m1_to_float(nibble(record, k)) * s);
        }
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

void unpack_index_key_record(const uint8_t* record, int dim, float* out) {
    const uint8_t* scales = record + dim / 2;
    for (int g = 0; g < dim / kFp4IndexGroup; ++g) {
        float s = e8m0_to_float(scales[g]);
        for (int i = 0; i < kFp4IndexGroup; ++i) {
            int k = g * kFp4IndexGroup + i;
            out[k] = round_to_bf16(e2m1_to_float(nibble(record, k)) * s);
        }
    }
}

}  // namespace deepinfer
