// Packed, exact cache records (spec §6.1). Every cached value is a QDQ'd bf16 value, i.e. a small code
// times a scale, so storing code + scale and decoding gives the bit-identical bf16 value back.
//   window KV record:     dim e4m3 codes + dim/32 e8m0 scales        (512 lanes: 528 B)
//   compressed KV record: dim/2 bytes of e2m1 pairs + dim/16 e4m3    (512 lanes: 288 B)
//   index key record:     dim/2 bytes of e2m1 pairs + dim/32 e8m0    (128 lanes:  68 B)
// e2m1 pairs put the even element in the low nibble, as MXFP4 weights do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/numeric.h"

namespace deepinfer {

// The three kinds (Kernels::unpack_records takes them by kind).
enum class CacheRecord : uint32_t { kWindow, kCompressed, kIndexKey };

inline constexpr size_t window_record_bytes(int dim) { return static_cast<size_t>(dim) + dim / 32; }
inline constexpr size_t compressed_record_bytes(int dim) { return static_cast<size_t>(dim) / 2 + dim / 16; }
inline constexpr size_t index_key_record_bytes(int dim) { return static_cast<size_t>(dim) / 2 + dim / 32; }

// x: fp32 [dim] holding bf16 values (post-RoPE). Writes the record and, if qdq is non-null, the QDQ'd
// values (fp32 [dim], bf16-representable) that the reference would keep in its bf16 cache.
void pack_window_record(const float* x, int dim, uint8_t* record, float* qdq);
// Unpack to the bf16 values, as fp32 or as bf16.
void unpack_window_record(const uint8_t* record, int dim, float* out);
void unpack_window_record(const uint8_t* record, int dim, bf16* out);

void pack_compressed_record(const float* x, int dim, uint8_t* record, float* qdq);
void unpack_compressed_record(const uint8_t* record, int dim, float* out);
void unpack_compressed_record(const uint8_t* record, int dim, bf16* out);

void pack_index_key_record(const float* x, int dim, uint8_t* record, float* qdq);
void unpack_index_key_record(const uint8_t* record, int dim, float* out);
void unpack_index_key_record(const uint8_t* record, int dim, bf16* out);

}  // namespace deepinfer
