// BPE vocabulary, merge table and merge loop (see bpe_model.h). Loading follows tokenizers'
// models/bpe/serialization.rs and BpeBuilder::build; merging follows Word::merge_all.
#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>

#include "tokenizer/byte_level.h"

namespace deepinfer::tokenizer {
namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kEmptyKey = std::numeric_limits<uint64_t>::max();
// Below this many symbols a rescan of all pairs per merge beats a heap; above, HF's heap algorithm is used.
constexpr size_t kSmallWord = 48;
// tokenizers caches words shorter than 256 bytes (MAX_LENGTH in models/bpe/model.rs); we do the same.
constexpr size_t kMaxCachedWord = 256;
constexpr size_t kCacheCapacity = 1 << 17;

uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t slot_of(uint64_t key, uint64_t mask) { return ((key * 0x9E3779B97F4A7C15ull) >> 20) & mask; }

struct StringViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Per-thread memo of encode_word results, shared by at most kSlots models (round-robin eviction).
struct WordCache {
    uint64_t owner = 0;
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringViewHash, std::equal_to<>> index;
    std::vector<int32_t> ids;
};

WordCache& cache_for(uint64_t owner) {
    constexpr int kSlots = 4;
    thread_local WordCache caches[kSlots];
    thread_local int next_slot = 0;
    for (auto& c : caches) {
        if (c.owner == owner) return c;
    }
    WordCache& c = caches[next_slot];
    next_slot = (next_slot + 1) % kSlots;
    c.owner = owner;
    c.index.clear();
    c.ids.clear();
    return c;
}

}  // namespace

void BpeModel::MergeTable::build(size_t n) {
    size_t capacity = 16;
    while (capacity < 2 * n) capacity <<= 1;
    keys.assign(capacity, kEmptyKey);
    ranks.assign(capacity, kNoRank);
    new_ids.assign(capacity, -1);
    mask = capacity - 1;
}

void BpeModel::MergeTable::insert(int32_t left, int32_t right, uint32_t rank, int32_t new_id) {
    const uint64_t key = pair_key(left, right);
    for (uint64_t slot = slot_of(key, mask);; slot = (slot + 1) & mask) {
        if (keys[slot] == kEmptyKey || keys[slot] == key) {
            keys[slot] = key;
            ranks[slot] = rank;
            new_ids[slot] = new_id;
            return;
        }
    }
}

bool BpeModel::MergeTable::find(int32_t left, int32_t right, uint32_t* rank, int32_t* new_id) const {
    const uint64_t key = pair_key(left, right);
    for (uint64_t slot = slot_of(key, mask);; slot = (slot + 1) & mask) {
        if (keys[slot] == key) {
            *rank = ranks[slot];
            *new_id = new_ids[slot];
            return true;
        }
        if (keys[slot] == kEmptyKey) return false;
    }
}

Expected<BpeModel> BpeModel::from_json(const nlohmann::json& model) {
    if (!model.is_object()) return corrupt("model: expected an object");
    if (model.contains("type") && model["type"] != "BPE") {
        return error(StatusCode::kUnsupported, "model.type is {}; only \"BPE\" models are supported",
                     model["type"].dump());
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (model.contains(key) && !model[key].is_null()) {
            return error(StatusCode::kUnsupported, "model.{} is set; byte-level BPE here supports only null", key);
        }
    }
    if (model.contains("dropout") && !model["dropout"].is_null()) {
        return error(StatusCode::kUnsupported, "model.dropout is set; encoding must be deterministic");
    }
    if (model.value("byte_fallback", false)) {
        return error(StatusCode::kUnsupported, "model.byte_fallback is true; byte-level BPE never needs it");
    }
    auto vocab_it = model.find("vocab");
    auto merges_it = model.find("merges");
    if (vocab_it == model.end() || merges_it == model.end()) {
        return corrupt("model: missing {} (a BPE model needs both \"vocab\" and \"merges\")",
                       vocab_it == model.end() ? "\"vocab\"" : "\"merges\"");
    }
    if (!vocab_it->is_object()) return corrupt("model.vocab: expected an object of token -> id");
    if (!merges_it->is_array()) return corrupt("model.merges: expected an array");

    static std::atomic<uint64_t> next_owner{1};
    BpeModel m;
    m.cache_owner_ = next_owner++;
    m.vocab_.reserve(vocab_it->size());
    int64_t max_id = -1;
    for (const auto& [token, id] : vocab_it->items()) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
            return corrupt("model.vocab[\"{}\"]: id must be a non-negative 32-bit integer, got {}", token, id.dump());
        }
        m.vocab_.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
        max_id = std::max(max_id, id.get<int64_t>());
    }
    m.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
    m.has_id_.assign(static_cast<size_t>(max_id + 1), false);
    for (const auto& [token, id] : m.vocab_) {
        if (m.has_id_[id]) {
            return corrupt("model.vocab: id {} is given to both \"{}\" and \"{}\"", id, m.id_to_token_[id], token);
        }
        m.has_id_[id] = true;
        m.id_to_token_[id] = token;
    }

    m.merges_.build(merges_it->size());
    uint32_t rank = 0;
    std::string merged;
    for (size_t k = 0; k < merges_it->size(); ++k) {
        const nlohmann::json& entry = (*merges_it)[k];
        std::string left, right;
        if (entry.is_string()) {
            const std::string& line = entry.get_ref<const std::string&>();
            if (line.rfind("#version", 0) == 0) continue;
            size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
                return corrupt("model.merges[{}]: \"{}\" is not two tokens separated by one space", k, line);
            }
            left = line.substr(0, space);
            right = line.substr(space + 1);
        } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
            left = entry[0].get<std::string>();
            right = entry[1].get<std::string>();
        } else {
            return corrupt("model.merges[{}]: expected \"a b\" or [\"a\", \"b\"], got {}", k, entry.dump());
        }
        merged = left + right;
        int32_t a = m.token_to_id(left), b = m.token_to_id(right), c = m.token_to_id(merged);
        for (auto [id, token] : {std::pair{a, &left}, std::pair{b, &right}, std::pair{c, &merged}}) {
            if (id < 0) return corrupt("model.merges[{}]: token \"{}\" is not in the vocabulary", k, *token);
        }
        m.merges_.insert(a, b, rank++, c);
    }
    m.merge_count_ = rank;

    for (int b = 0; b < 256; ++b) {
        std::string symbol = bytes_to_symbols(std::string(1, static_cast<char>(b)));
        m.byte_ids_[b] = m.token_to_id(symbol);
        m.byte_fallback_ids_[b] = -1;
    }
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
        m.unk_id_ = m.token_to_id(model["unk_token"].get<std::string>());
        if (m.unk_id_ < 0) return corrupt("model.unk_token \"{}\" is not in the vocabulary", model["unk_token"].get<std::string>());
    }
    m.fuse_unk_ = model.value("fuse_unk", false);
    m.ignore_merges_ = model.value("ignore_merges", false);
    return m;
}

int32_t BpeModel::token_to_id(std::string_view token) const {
    auto it = vocab_.find(std::string(token));
    return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= has_id_.size() || !has_id_[id]) return nullptr;
    return &id_to_token_[id];
}

void BpeModel::initial_symbols(std::string_view bytes, std::vector<int32_t>& symbols) const {
    // One symbol per byte; a byte missing from the vocabulary becomes the unk token (fused with a preceding
    // unk when fuse_unk) or, without one, disappears, as in tokenizers' merge_word.
    bool last_was_unk = false;
    for (char ch : bytes) {
        int32_t id = byte_ids_[static_cast<uint8_t>(ch)];
        if (id >= 0) {
            symbols.push_back(id);
            last_was_unk = false;
        } else if (unk_id_ >= 0) {
            if (!(fuse_unk_ && last_was_unk)) symbols.push_back(unk_id_);
            last_was_unk = true;
        }
    }
}

void BpeModel::merge_small(std::vector<int32_t>& sym) const {
    size_t n = sym.size();
    uint32_t rank[kSmallWord];
    int32_t merged[kSmallWord];
    auto lookup = [&](size_t i) {
        if (!merges_.find(sym[i], sym[i + 1], &rank[i], &merged[i])) rank[i] = kNoRank;
    };
    for (size_t i = 0; i + 1 < n; ++i) lookup(i);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; ++i) {
            if (rank[i] < rank[best]) best = i;
        }
        if (rank[best] == kNoRank) break;
        sym[best] = merged[best];
        for (size_t j = best + 1; j + 1 < n; ++j) sym[j] = sym[j + 1];
        for (size_t j = best + 1; j + 2 < n; ++j) {
            rank[j] = rank[j + 1];
            merged[j] = merged[j + 1];
        }
        --n;
        if (best > 0) lookup(best - 1);
        if (best + 1 < n) lookup(best);
    }
    sym.resize(n);
}

void BpeModel::merge_large(std::vector<int32_t>& sym) const {
    struct Entry {
        uint32_t rank;
        uint32_t pos;
        int32_t new_id;
        bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    const size_t n = sym.size();
    std::vector<int32_t> prev(n), next(n);
    std::vector<bool> alive(n, true);
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    for (size_t i = 0; i < n; ++i) {
        prev[i] = static_cast<int32_t>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    }
    auto push = [&](int32_t left) {
        uint32_t rank;
        int32_t new_id;
        if (left >= 0 && next[left] >= 0 && merges_.find(sym[left], sym[next[left]], &rank, &new_id)) {
            queue.push({rank, static_cast<uint32_t>(left), new_id});
        }
    };
    for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
    while (!queue.empty()) {
        Entry top = queue.top();
        queue.pop();
        const int32_t pos = static_cast<int32_t>(top.pos);
        if (!alive[pos] || next[pos] < 0) continue;
        const int32_t right = next[pos];
        uint32_t rank;
        int32_t new_id;
        // A stale entry: the pair at pos changed since it was queued (its merged id would differ).
        if (!merges_.find(sym[pos], sym[right], &rank, &new_id) || new_id != top.new_id) continue;
        sym[pos] = new_id;
        alive[right] = false;
        next[pos] = next[right];
        if (next[pos] >= 0) prev[next[pos]] = pos;
        push(prev[pos]);
        push(pos);
    }
    size_t out = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) sym[out++] = sym[i];
    sym.resize(out);
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
    if (bytes.empty()) return;
    if (bytes.size() == 1 && byte_ids_[static_cast<uint8_t>(bytes[0])] >= 0) {
        out.push_back(byte_ids_[static_cast<uint8_t>(bytes[0])]);
        return;
    }
    WordCache* cache = nullptr;
    if (bytes.size() < kMaxCachedWord) {
        cache = &cache_for(cache_owner_);
        auto it = cache->index.find(bytes);
        if (it != cache->index.end()) {
            out.insert(out.end(), cache->ids.begin() + it->second.first,
                       cache->ids.begin() + it->second.first + it->second.second);
            return;
        }
    }
    thread_local std::vector<int32_t> symbols;
    symbols.clear();
    int32_t whole = -1;
    if (ignore_merges_) whole = token_to_id(bytes_to_symbols(bytes));
    if (whole >= 0) {
        symbols.push_back(whole);
    } else {
        initial_symbols(bytes, symbols);
        if (symbols.size() <= kSmallWord) {
            merge_small(symbols);
        } else {
            merge_large(symbols);
        }
    }
    out.insert(out.end(), symbols.begin(), symbols.end());
    if (cache) {
        if (cache->index.size() >= kCacheCapacity) {
            cache->index.clear();
            cache->ids.clear();
        }
        cache->index.emplace(std::string(bytes),
                             std::pair{static_cast<uint32_t>(cache->ids.size()), static_cast<uint32_t>(symbols.size())});
        cache->ids.insert(cache->ids.end(), symbols.begin(), symbols.end());
    }
}

}  // namespace deepinfer::tokenizer
