// Per-sequence block tables and compressor ring.
#include "kv/sequence_cache.h"

#include "core/check.h"

namespace deepinfer::kv {

SequenceCache::SequenceCache(const CacheLayout& layout) : layout_(&layout) {
    size_t n = layout.sources.size() * static_cast<size_t>(layout.compressor_ring);
    compressor_ring_.assign(n * 2 * layout.head_dim, 0.0f);
    compressor_ring_pos_.assign(n, -1);
}

bool SequenceCache::ensure_blocks(KvPools& pools, int64_t end) {
    const int64_t T = layout_->block_tokens;
    const size_t need = static_cast<size_t>((end + T - 1) / T);
    size_t add_window = need > window_blocks_.size() ? need - window_blocks_.size() : 0;
    size_t add_compressed = need > compressed_blocks_.size() ? need - compressed_blocks_.size() : 0;
    if (pools.window.free_count() < static_cast<int32_t>(add_window)) return false;
    if (!layout_->sources.empty() && pools.compressed.free_count() < static_cast<int32_t>(add_compressed)) return false;
    for (size_t i = 0; i < add_window; ++i) window_blocks_.push_back(pools.window.allocate());
    for (size_t i = 0; i < add_compressed; ++i)
        compressed_blocks_.push_back(layout_->sources.empty() ? -1 : pools.compressed.allocate());
    return true;
}

void SequenceCache::release_old_window_blocks(KvPools& pools, int64_t keep_from) {
    const int64_t T = layout_->block_tokens;
    int64_t first_needed = keep_from - layout_->window;  // oldest position any query >= keep_from reads
    if (first_needed <= 0) return;
    int64_t n_release = first_needed / T;  // blocks entirely before first_needed
    for (int64_t b = 0; b < n_release && b < static_cast<int64_t>(window_blocks_.size()); ++b)
        if (window_blocks_[b] >= 0) {
            pools.window.release(window_blocks_[b]);
            window_blocks_[b] = -1;
        }
}

void SequenceCache::release_all(KvPools& pools) {
    for (int32_t b : window_blocks_)
        if (b >= 0) pools.window.release(b);
    for (int32_t b : compressed_blocks_)
        if (b >= 0) pools.compressed.release(b);
    window_blocks_.clear();
    compressed_blocks_.clear();
    length_ = 0;
    std::fill(compressor_ring_pos_.begin(), compressor_ring_pos_.end(), -1);
}

void SequenceCache::truncate(int64_t length) {
    DI_CHECK_LE(length, length_);
    length_ = length;
}

uint8_t* SequenceCache::window_record(KvPools& pools, int layer, int64_t pos) const {
    const int64_t T = layout_->block_tokens;
    int32_t block = window_blocks_[static_cast<size_t>(pos / T)];
    DI_CHECK_MSG(block >= 0, "window record of released block (pos {})", pos);
    return pools.window.data(block) + layout_->window_layer_offset(layer) + (pos % T) * layout_->window_record_bytes;
}

uint8_t* SequenceCache::compressed_record(KvPools& pools, int source, int64_t entry) const {
    const auto& s = layout_->sources[source];
    const int64_t per_block = layout_->block_tokens / s.ratio;
    int32_t block = compressed_blocks_[static_cast<size_t>(entry / per_block)];
    return pools.compressed.data(block) + s.kv_offset + (entry % per_block) * layout_->compressed_record_bytes;
}

uint8_t* SequenceCache::index_record(KvPools& pools, int source, int64_t entry) const {
    const auto& s = layout_->sources[source];
    const int64_t per_block = layout_->block_tokens / s.ratio;
    int32_t block = compressed_blocks_[static_cast<size_t>(entry / per_block)];
    return pools.compressed.data(block) + s.index_offset + (entry % per_block) * layout_->index_record_bytes;
}

float* SequenceCache::compressor_slot(int source, int64_t pos) {
    const int ring = layout_->compressor_ring;
    size_t slot = static_cast<size_t>(source) * ring + static_cast<size_t>((pos / 2) % ring);
    compressor_ring_pos_[slot] = pos;
    return compressor_ring_.data() + slot * 2 * layout_->head_dim;
}

const float* SequenceCache::find_compressor_slot(int source, int64_t pos) const {
    const int ring = layout_->compressor_ring;
    size_t slot = static_cast<size_t>(source) * ring + static_cast<size_t>((pos / 2) % ring);
    if (compressor_ring_pos_[slot] != pos) return nullptr;
    return compressor_ring_.data() + slot * 2 * layout_->head_dim;
}

}  // namespace deepinfer::kv
