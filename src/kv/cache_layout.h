// Byte layout of the paged KV caches (spec §6.1); model::make_cache_layout derives it from the config.
// Two pools of blocks,
// both indexed by token position in units of `block_tokens`:
//   window pool:     per block, for every block of the model (backbone + DSpark), `block_tokens` fp8
//                    window records (528 B each at 512 lanes). Only the last `window` positions of a
//                    sequence are read, so older window blocks can be released (or kept for prefix reuse).
//   compressed pool: per block, for every KV-source layer with ratio R, block_tokens/R compressed-KV
//                    records (288 B) and as many index-key records (68 B): 890 B/token for the release.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer::kv {

struct KvSourceLayout {
    int layer = -1;            // backbone layer that owns this compressed cache
    int ratio = 1;
    size_t kv_offset = 0;      // byte offset of its compressed records inside a compressed block
    size_t index_offset = 0;   // byte offset of its index-key records
};

struct CacheLayout {
    int block_tokens = 64;
    int window = 128;
    int n_window_layers = 0;           // backbone layers + DSpark blocks
    size_t window_record_bytes = 0;
    size_t compressed_record_bytes = 0;
    size_t index_record_bytes = 0;
    std::vector<KvSourceLayout> sources;   // in layer order
    std::vector<int> source_of_layer;      // [backbone layer] -> index into sources of its kv source, or -1
    size_t window_block_bytes = 0;
    size_t compressed_block_bytes = 0;
    int head_dim = 0, index_head_dim = 0;
    int compressor_ring = 16;              // pending ratio-2 compressor states kept per source (rollback depth)

    // Byte offset of layer `layer`'s window records inside a window block.
    size_t window_layer_offset(int layer) const { return static_cast<size_t>(layer) * block_tokens * window_record_bytes; }
    double compressed_bytes_per_token() const { return static_cast<double>(compressed_block_bytes) / block_tokens; }
};

}  // namespace deepinfer::kv
