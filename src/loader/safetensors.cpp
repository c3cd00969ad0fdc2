// safetensors reading (mmap + strict validation) and writing.
#include "loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace deepinfer::loader {

using nlohmann::json;
namespace fs = std::filesystem;

int64_t TensorEntry::numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
    std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
    file->path_ = path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error(StatusCode::kNotFound, "{}: cannot open: {}", path, std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ::close(fd);
        return error(StatusCode::kIoError, "{}: cannot stat: {}", path, std::strerror(errno));
    }
    file->size_ = static_cast<size_t>(st.st_size);
    if (file->size_ > 0) {
        void* m = mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            ::close(fd);
            return error(StatusCode::kIoError, "{}: mmap failed: {}", path, std::strerror(errno));
        }
        file->mapping_ = m;
    }
    ::close(fd);
    DI_RETURN_IF_ERROR(file->parse().with_context(path));
    return file;
}

SafetensorsFile::~SafetensorsFile() {
    if (mapping_) munmap(mapping_, size_);
}

Status SafetensorsFile::parse() {
    if (size_ < 8) return corrupt("file is {} bytes, shorter than the 8-byte header length (truncated?)", size_);
    const uint8_t* base = static_cast<const uint8_t*>(mapping_);
    uint64_t header_len;
    std::memcpy(&header_len, base, 8);
    if (header_len > size_ - 8)
        return corrupt("header length {} runs past the end of the file ({} bytes; truncated?)", header_len, size_);
    if (header_len == 0) return corrupt("header length is 0");
    json header;
    try {
        header = json::parse(reinterpret_cast<const char*>(base + 8), reinterpret_cast<const char*>(base + 8 + header_len));
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double
        return corrupt("header is not valid JSON: {}", e.what());
    }
    if (!header.is_object()) return corrupt("header is not a JSON object");
    const size_t data_start = 8 + header_len, data_size = size_ - data_start;
    struct Range {
        uint64_t begin, end;
        const std::string* name;
    };
    std::vector<Range> ranges;
    for (auto& [name, value] : header.items()) {
        if (name == "__metadata__") {
            if (!value.is_object()) return corrupt("__metadata__ is not an object");
            for (auto& [k, v] : value.items()) {
                if (!v.is_string()) return corrupt("__metadata__.{} is not a string", k);
                metadata_[k] = v.get<std::string>();
            }
            continue;
        }
        if (!value.is_object()) return corrupt("tensor {}: entry is not an object", name);
        auto dtype_it = value.find("dtype");
        auto shape_it = value.find("shape");
        auto offsets_it = value.find("data_offsets");
        if (dtype_it == value.end() || !dtype_it->is_string()) return corrupt("tensor {}: missing dtype", name);
        if (shape_it == value.end() || !shape_it->is_array()) return corrupt("tensor {}: missing shape", name);
        if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2)
            return corrupt("tensor {}: data_offsets must be [begin, end]", name);
        TensorEntry entry;
        entry.name = name;
        auto dtype = parse_dtype(dtype_it->get<std::string>());
        if (!dtype) return corrupt("tensor {}: unknown dtype \"{}\"", name, dtype_it->get<std::string>());
        entry.dtype = *dtype;
        for (const auto& d : *shape_it) {
            if (!d.is_number_unsigned()) return corrupt("tensor {}: shape entries must be non-negative integers", name);
            entry.shape.push_back(d.get<int64_t>());
        }
        for (const auto& o : *offsets_it)
            if (!o.is_number_unsigned()) return corrupt("tensor {}: data_offsets must be non-negative integers", name);
        uint64_t begin = (*offsets_it)[0].get<uint64_t>(), end = (*offsets_it)[1].get<uint64_t>();
        if (begin > end) return corrupt("tensor {}: data_offsets [{}, {}] are reversed", name, begin, end);
        if (end > data_size)
            return corrupt("tensor {}: data_offsets [{}, {}] run past the data section ({} bytes; truncated?)", name,
                           begin, end, data_size);
        // Element count with overflow protection.
        unsigned __int128 expected = dtype_size(entry.dtype);
        for (auto d : entry.shape) expected *= static_cast<uint64_t>(d);
        if (expected != end - begin)
            return corrupt("tensor {}: shape {} of {} needs {} bytes but data_offsets span {}", name,
                           fmt::join(entry.shape, "x"), dtype_name(entry.dtype), static_cast<uint64_t>(expected),
                           end - begin);
        entry.data = base + data_start + begin;
        entry.nbytes = end - begin;
        entry.file = path_;
        tensors_.push_back(std::move(entry));
    }
    for (const auto& t : tensors_) ranges.push_back({static_cast<uint64_t>(t.data - base - data_start),
                                                     static_cast<uint64_t>(t.data - base - data_start) + t.nbytes,
                                                     &t.name});
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].begin < ranges[i - 1].end)
            return corrupt("tensors {} and {} overlap (data_offsets [{}, {}] and [{}, {}])", *ranges[i - 1].name,
                           *ranges[i].name, ranges[i - 1].begin, ranges[i - 1].end, ranges[i].begin, ranges[i].end);
    std::sort(tensors_.begin(), tensors_.end(), [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
    return Status::ok();
}

Expected<TensorStore> TensorStore::open_dir(const std::string& dir) {
    TensorStore store;
    fs::path root(dir);
    fs::path index_path = root / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(index_path, ec)) {
        std::ifstream in(index_path);
        std::stringstream ss;
        ss << in.rdbuf();
        json index;
        try {
            index = json::parse(ss.str());
        } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double
            return corrupt("{}: not valid JSON: {}", index_path.string(), e.what());
        }
        auto map_it = index.find("weight_map");
        if (!index.is_object() || map_it == index.end() || !map_it->is_object())
            return corrupt("{}: no \"weight_map\" object", index_path.string());
        std::map<std::string, std::set<std::string>> shard_tensors;
        for (auto& [name, shard] : map_it->items()) {
            if (!shard.is_string()) return corrupt("{}: weight_map.{} is not a file name", index_path.string(), name);
            shard_tensors[shard.get<std::string>()].insert(name);
        }
        for (auto& [shard, names] : shard_tensors) {
            fs::path shard_path = root / shard;
            if (!fs::exists(shard_path, ec))
                return corrupt("{}: shard {} (listed for {} tensors, e.g. {}) does not exist", index_path.string(),
                               shard, names.size(), *names.begin());
            DI_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(shard_path.string()));
            std::set<std::string> present;
            for (const auto& t : file->tensors()) present.insert(t.name);
            for (const auto& name : names)
                if (!present.count(name))
                    return corrupt("{}: tensor {} is listed in {} but the shard does not contain it",
                                   index_path.string(), name, shard);
            for (const auto& name : present)
                if (!names.count(name))
                    return corrupt("{}: shard {} contains tensor {}, which the index does not list",
                                   index_path.string(), shard, name);
            store.files_.push_back(std::move(file));
        }
    } else {
        fs::path single = root / "model.safetensors";
        if (!fs::exists(single, ec))
            return error(StatusCode::kNotFound, "{}: neither model.safetensors.index.json nor model.safetensors exists",
                         dir);
        DI_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(single.string()));
        store.files_.push_back(std::move(file));
    }
    for (const auto& file : store.files_)
        for (const auto& t : file->tensors()) {
            auto [it, inserted] = store.by_name_.emplace(t.name, &t);
            if (!inserted) return corrupt("{}: tensor {} appears in both {} and {}", dir, t.name, it->second->file, t.file);
            store.ordered_.push_back(&t);
        }
    std::sort(store.ordered_.begin(), store.ordered_.end(),
              [](const TensorEntry* a, const TensorEntry* b) { return a->name < b->name; });
    return store;
}

const TensorEntry* TensorStore::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    tensors_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

size_t SafetensorsWriter::total_bytes() const {
    size_t n = 0;
    for (const auto& t : tensors_) n += t.bytes.size();
    return n;
}

std::vector<std::string> SafetensorsWriter::names() const {
    std::vector<std::string> names;
    for (const auto& t : tensors_) names.push_back(t.name);
    return names;
}

Status SafetensorsWriter::write(const std::string& path) const {
    json header = json::object();
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
        header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
                          {"data_offsets", {offset, offset + t.bytes.size()}}};
        offset += t.bytes.size();
    }
    if (!metadata_.empty()) header["__metadata__"] = metadata_;
    std::string text = header.dump();
    while (text.size() % 8 != 0) text.push_back(' ');
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        if (!out) return error(StatusCode::kIoError, "{}: cannot open for writing", tmp);
        uint64_t len = text.size();
        out.write(reinterpret_cast<const char*>(&len), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const auto& t : tensors_)
            out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
        if (!out) return error(StatusCode::kIoError, "{}: write failed", tmp);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) return error(StatusCode::kIoError, "{}: rename failed: {}", path, ec.message());
    return Status::ok();
}

Status write_safetensors_index(const std::string& path, const std::vector<std::pair<std::string, std::string>>& map,
                               size_t total_size) {
    json index;
    index["metadata"] = {{"total_size", total_size}};
    json weight_map = json::object();
    for (const auto& [name, file] : map) weight_map[name] = file;
    index["weight_map"] = weight_map;
    std::ofstream out(path);
    if (!out) return error(StatusCode::kIoError, "{}: cannot open for writing", path);
    out << index.dump(2) << "\n";
    return out ? Status::ok() : error(StatusCode::kIoError, "{}: write failed", path);
}

}  // namespace deepinfer::loader
