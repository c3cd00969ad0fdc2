// Incremental detokenizer (see detokenizer.h). Cutting the byte stream just before a lead byte never changes
// the lossy decoding of what precedes it (utf8_stable_prefix), so decoding each released prefix separately
// gives the same text as decoding everything at once.
#include "tokenizer/detokenizer.h"

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

Expected<std::string> IncrementalDetokenizer::push(std::span<const int32_t> ids) {
    const size_t old_size = pending_.size();
    Status s = tokenizer_.decode_bytes(ids, skip_special_, pending_);
    if (!s.is_ok()) {
        pending_.resize(old_size);
        return s;
    }
    const size_t stable = utf8_stable_prefix(pending_);
    std::string text = utf8_lossy(std::string_view(pending_).substr(0, stable));
    pending_.erase(0, stable);
    return text;
}

std::string IncrementalDetokenizer::flush() {
    std::string text = utf8_lossy(pending_);
    pending_.clear();
    return text;
}

}  // namespace deepinfer::tokenizer
