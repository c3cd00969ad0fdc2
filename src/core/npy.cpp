// .npy reading and writing (little-endian, C order, no pickles).
#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace deepinfer {
namespace {
size_t descr_size(const std::string& descr) {
    if (descr == "<f4" || descr == "<i4" || descr == "<u4") return 4;
    if (descr == "<f8" || descr == "<i8" || descr == "<u8") return 8;
    if (descr == "<f2" || descr == "<i2" || descr == "<u2") return 2;
    if (descr == "|u1" || descr == "|i1" || descr == "|b1") return 1;
    return 0;
}
}  // namespace

int64_t NpyArray::numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const void* data, size_t bytes) {
    std::ostringstream header;
    header << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); ++i) header << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
    header << "), }";
    std::string h = header.str();
    size_t total = 10 + h.size() + 1;
    size_t pad = (64 - total % 64) % 64;
    h.append(pad, ' ');
    h.push_back('\n');
    std::ofstream out(path, std::ios::binary);
    if (!out) return error(StatusCode::kIoError, "{}: cannot open for writing", path);
    const char magic[] = "\x93NUMPY\x01\x00";
    out.write(magic, 8);
    uint16_t len = static_cast<uint16_t>(h.size());
    out.write(reinterpret_cast<const char*>(&len), 2);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!out) return error(StatusCode::kIoError, "{}: write failed", path);
    return Status::ok();
}

Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return write_npy(path, "<f4", shape, data, static_cast<size_t>(n) * 4);
}

Expected<NpyArray> read_npy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(StatusCode::kNotFound, "{}: cannot open", path);
    char magic[8];
    in.read(magic, 8);
    if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) return corrupt("{}: not a .npy file", path);
    uint32_t header_len = 0;
    if (magic[6] == 1) {
        uint16_t len16;
        in.read(reinterpret_cast<char*>(&len16), 2);
        header_len = len16;
    } else {
        in.read(reinterpret_cast<char*>(&header_len), 4);
    }
    std::string header(header_len, '\0');
    in.read(header.data(), header_len);
    if (!in) return corrupt("{}: truncated header", path);
    NpyArray array;
    auto descr_pos = header.find("'descr':");
    if (descr_pos == std::string::npos) return corrupt("{}: header has no descr", path);
    auto q1 = header.find('\'', descr_pos + 8), q2 = header.find('\'', q1 + 1);
    array.descr = header.substr(q1 + 1, q2 - q1 - 1);
    if (header.find("'fortran_order': True") != std::string::npos) return corrupt("{}: fortran order unsupported", path);
    auto s1 = header.find('(', header.find("'shape':")), s2 = header.find(')', s1);
    std::string dims = header.substr(s1 + 1, s2 - s1 - 1);
    std::stringstream ss(dims);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.find_first_not_of(" ") == std::string::npos) continue;
        array.shape.push_back(std::stoll(item));
    }
    size_t elem = descr_size(array.descr);
    if (elem == 0) return corrupt("{}: unsupported dtype {}", path, array.descr);
    array.data.resize(static_cast<size_t>(array.numel()) * elem);
    in.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
    if (!in) return corrupt("{}: truncated data", path);
    return array;
}

}  // namespace deepinfer
