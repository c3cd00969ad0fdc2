// safetensors files: a memory-mapped reader that refuses every malformed input with a message naming
// the file and what is wrong, a writer, and sharded checkpoints (model.safetensors.index.json).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace deepinfer::loader {

struct TensorEntry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;  // points into the file's mapping
    size_t nbytes = 0;
    std::string file;               // path of the shard holding it
    int64_t numel() const;
};

// One .safetensors file, mapped read-only for the life of the object.
class SafetensorsFile {
   public:
    static Expected<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return path_; }
    const std::vector<TensorEntry>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    size_t file_size() const { return size_; }

   private:
    SafetensorsFile() = default;
    Status parse();

    std::string path_;
    void* mapping_ = nullptr;
    size_t size_ = 0;
    std::vector<TensorEntry> tensors_;
    std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory: one model.safetensors, or shards listed by
// model.safetensors.index.json (every listed shard must exist and hold exactly the tensors listed).
class TensorStore {
   public:
    static Expected<TensorStore> open_dir(const std::string& dir);

    const TensorEntry* find(const std::string& name) const;
    const std::vector<const TensorEntry*>& entries() const { return ordered_; }
    const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

   private:
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::unordered_map<std::string, const TensorEntry*> by_name_;
    std::vector<const TensorEntry*> ordered_;
};

// Writes one safetensors file: the JSON header (space-padded to a multiple of 8 bytes), then the tensors
// packed contiguously in insertion order.
class SafetensorsWriter {
   public:
    void add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
    void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
    size_t total_bytes() const;
    Status write(const std::string& path) const;
    std::vector<std::string> names() const;

   private:
    struct Pending {
        std::string name;
        DType dtype;
        std::vector<int64_t> shape;
        std::vector<uint8_t> bytes;
    };
    std::vector<Pending> tensors_;
    std::map<std::string, std::string> metadata_;
};

// Write model.safetensors.index.json mapping each tensor name to its shard file name.
Status write_safetensors_index(const std::string& path, const std::vector<std::pair<std::string, std::string>>& map,
                               size_t total_size);

}  // namespace deepinfer::loader
