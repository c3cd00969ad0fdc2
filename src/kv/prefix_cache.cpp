// Prefix cache over the two block pools.
#include "kv/prefix_cache.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer::kv {

void extend_block_hashes(const int32_t* tokens, int64_t n_tokens, int block_tokens, uint64_t salt,
                         std::vector<uint64_t>* out) {
    uint64_t h = out->empty() ? (0xcbf29ce484222325ull ^ salt) : out->back();
    for (int64_t b = static_cast<int64_t>(out->size()); (b + 1) * block_tokens <= n_tokens; ++b) {
        for (int64_t i = b * block_tokens; i < (b + 1) * block_tokens; ++i) {
            uint64_t v = static_cast<uint32_t>(tokens[i]);
            h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
            h *= 0x100000001b3ull;
        }
        out->push_back(h);
    }
}

void PrefixCache::touch(Table& table, std::list<uint64_t>& lru, uint64_t hash) {
    auto& e = table.at(hash);
    lru.erase(e.lru);
    lru.push_front(hash);
    e.lru = lru.begin();
}

int64_t PrefixCache::attach(const std::vector<uint64_t>& hashes, int64_t max_blocks, SequenceCache* cache) {
    const CacheLayout& L = pools_.layout;
    const bool has_compressed = !L.sources.empty();
    const int64_t limit = std::min<int64_t>(max_blocks, static_cast<int64_t>(hashes.size()));
    ++queries_;
    query_tokens_ += limit * L.block_tokens;
    // Longest run of compressed blocks.
    int64_t m = 0;
    while (m < limit && (!has_compressed || compressed_.count(hashes[m]))) ++m;
    // Shrink until the window blocks that positions >= m*T read are cached too.
    const int64_t window_blocks = (L.window + L.block_tokens - 1) / L.block_tokens;
    auto window_ok = [&](int64_t m_blocks) {
        for (int64_t b = std::max<int64_t>(0, m_blocks - window_blocks); b < m_blocks; ++b)
            if (!window_.count(hashes[b])) return false;
        return true;
    };
    while (m > 0 && !window_ok(m)) --m;
    if (m == 0) return 0;
    DI_CHECK_EQ(cache->length(), 0);
    auto& wb = cache->mutable_window_blocks();
    auto& cb = cache->mutable_compressed_blocks();
    wb.assign(m, -1);
    cb.assign(m, -1);
    for (int64_t b = 0; b < m; ++b) {
        if (has_compressed) {
            cb[b] = compressed_.at(hashes[b]).block;
            pools_.compressed.retain(cb[b]);
            touch(compressed_, compressed_lru_, hashes[b]);
        }
        if (b >= m - window_blocks) {
            wb[b] = window_.at(hashes[b]).block;
            pools_.window.retain(wb[b]);
            touch(window_, window_lru_, hashes[b]);
        }
    }
    cache->set_length(m * L.block_tokens);
    ++hits_;
    hit_tokens_ += m * L.block_tokens;
    return m;
}

void PrefixCache::insert(const std::vector<uint64_t>& hashes, int64_t n_blocks, const SequenceCache& cache) {
    const bool has_compressed = !pools_.layout.sources.empty();
    n_blocks = std::min<int64_t>(n_blocks, static_cast<int64_t>(hashes.size()));
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint64_t h = hashes[b];
        if (has_compressed && b < static_cast<int64_t>(cache.compressed_blocks().size()) &&
            cache.compressed_blocks()[b] >= 0 && !compressed_.count(h)) {
            int32_t block = cache.compressed_blocks()[b];
            pools_.compressed.retain(block);
            compressed_lru_.push_front(h);
            compressed_[h] = {block, compressed_lru_.begin()};
        }
        if (b < static_cast<int64_t>(cache.window_blocks().size()) && cache.window_blocks()[b] >= 0 && !window_.count(h)) {
            int32_t block = cache.window_blocks()[b];
            pools_.window.retain(block);
            window_lru_.push_front(h);
            window_[h] = {block, window_lru_.begin()};
        }
    }
}

bool PrefixCache::evict_one(Table& table, std::list<uint64_t>& lru, BlockPool& pool) {
    // Oldest entry whose block only the cache holds.
    for (auto it = lru.rbegin(); it != lru.rend(); ++it) {
        auto e = table.find(*it);
        if (pool.refcount(e->second.block) != 1) continue;
        pool.release(e->second.block);
        lru.erase(std::next(it).base());
        table.erase(e);
        return true;
    }
    return false;
}

bool PrefixCache::evict_for(int32_t window, int32_t compressed) {
    while (pools_.window.free_count() < window)
        if (!evict_one(window_, window_lru_, pools_.window)) break;
    while (pools_.compressed.free_count() < compressed)
        if (!evict_one(compressed_, compressed_lru_, pools_.compressed)) break;
    return pools_.window.free_count() >= window && pools_.compressed.free_count() >= compressed;
}

void PrefixCache::clear() {
    for (auto& [h, e] : compressed_) pools_.compressed.release(e.block);
    for (auto& [h, e] : window_) pools_.window.release(e.block);
    compressed_.clear();
    window_.clear();
    compressed_lru_.clear();
    window_lru_.clear();
}

}  // namespace deepinfer::kv
