// DType names and sizes.
#include "core/dtype.h"

#include <array>
#include <utility>

namespace deepinfer {
namespace {
struct DTypeInfo {
    DType dtype;
    std::string_view name;
    size_t size;
};
constexpr std::array<DTypeInfo, 16> kInfo = {{
    {DType::kF32, "F32", 4},      {DType::kF16, "F16", 2},       {DType::kBF16, "BF16", 2},
    {DType::kF64, "F64", 8},      {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kF8E8M0, "F8_E8M0", 1}, {DType::kI8, "I8", 1},         {DType::kU8, "U8", 1},
    {DType::kI16, "I16", 2},      {DType::kI32, "I32", 4},       {DType::kI64, "I64", 8},
    {DType::kU16, "U16", 2},      {DType::kU32, "U32", 4},       {DType::kU64, "U64", 8},
    {DType::kBool, "BOOL", 1},
}};
}  // namespace

size_t dtype_size(DType dtype) { return kInfo[static_cast<size_t>(dtype)].size; }
std::string_view dtype_name(DType dtype) { return kInfo[static_cast<size_t>(dtype)].name; }

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& info : kInfo)
        if (info.name == name) return info.dtype;
    return std::nullopt;
}

}  // namespace deepinfer
