// ReasoningSplitter: a two-state scanner for </think> over streamed text.
#include "server/reasoning_splitter.h"

#include <algorithm>

#include "tokenizer/protocol_tokens.h"

namespace deepinfer::server {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
    const size_t max = std::min(text.size(), marker.size() - 1);
    for (size_t len = max; len > 0; --len)
        if (text.substr(text.size() - len) == marker.substr(0, len)) return len;
    return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool in_reasoning) : in_reasoning_(in_reasoning), had_reasoning_(in_reasoning) {}

SplitDelta ReasoningSplitter::push(std::string_view delta) {
    SplitDelta out;
    if (!in_reasoning_) {
        out.content.assign(delta);
        return out;
    }
    pending_.append(delta);
    if (at_start_) {
        const std::string_view start = tokenizer::kThinkStartToken;
        if (pending_.size() < start.size() && start.substr(0, pending_.size()) == pending_) return out;  // undecided
        if (pending_.compare(0, start.size(), start) == 0) pending_.erase(0, start.size());
        at_start_ = false;
    }
    const std::string_view end = tokenizer::kThinkEndToken;
    const size_t at = pending_.find(end);
    if (at != std::string::npos) {
        out.reasoning = pending_.substr(0, at);
        out.content = pending_.substr(at + end.size());
        pending_.clear();
        in_reasoning_ = false;
        return out;
    }
    const size_t hold = partial_marker_suffix(pending_, end);
    out.reasoning = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

SplitDelta ReasoningSplitter::finish() {
    SplitDelta out;
    if (in_reasoning_) out.reasoning = std::move(pending_);
    else out.content = std::move(pending_);
    pending_.clear();
    at_start_ = false;
    return out;
}

}  // namespace deepinfer::server
