// Minimal .npy (NumPy format 1.0/2.0) reader and writer for fp32 / int32 / int64 arrays: the exchange
// format of logits dumps and golden data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer {

struct NpyArray {
    std::string descr;            // "<f4", "<i4", "<i8"
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;    // little-endian, C order

    int64_t numel() const;
    const float* f32() const { return reinterpret_cast<const float*>(data.data()); }
    const int32_t* i32() const { return reinterpret_cast<const int32_t*>(data.data()); }
    const int64_t* i64() const { return reinterpret_cast<const int64_t*>(data.data()); }
};

Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const void* data, size_t bytes);
Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
Expected<NpyArray> read_npy(const std::string& path);

}  // namespace deepinfer
