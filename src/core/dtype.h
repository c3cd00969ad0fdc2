// Storage dtypes of checkpoints and tensors, with the safetensors names of spec §3.1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t {
    kF32,
    kF16,
    kBF16,
    kF64,
    kF8E4M3,  // OCP float8_e4m3fn
    kF8E5M2,
    kF8E8M0,  // unsigned power-of-two scale ("ue8m0")
    kI8,      // routed experts: two e2m1 codes per byte (MXFP4)
    kU8,
    kI16,
    kI32,
    kI64,
    kU16,
    kU32,
    kU64,
    kBool,
};

// Bytes per element.
size_t dtype_size(DType dtype);
// safetensors name, e.g. "F8_E4M3".
std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace deepinfer
