// Incremental detokenization for streaming: ids arrive one at a time, text leaves as soon as it is final.
// A token can end inside a multi-byte UTF-8 character (byte-level BPE splits bytes freely), so an incomplete
// trailing sequence is held back until the bytes that complete it arrive. Nothing is ever dropped: the
// concatenation of every push() and the final flush() equals Tokenizer::decode() of all the ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

class IncrementalDetokenizer {
   public:
    explicit IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special = false)
        : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

    // Adds ids and returns the text that became final: valid UTF-8, possibly empty. Ill-formed bytes come out
    // as U+FFFD once it is certain that no later byte can complete them. An unknown id is kInvalidArgument
    // and leaves the state unchanged.
    Expected<std::string> push(std::span<const int32_t> ids);
    Expected<std::string> push(int32_t id) { return push(std::span<const int32_t>(&id, 1)); }

    // Ends the stream: returns the held-back bytes (an incomplete sequence becomes one U+FFFD, as in a full
    // decode) and resets, so the object can start a new stream.
    std::string flush();

    // Bytes held back (0 to 3).
    size_t pending_bytes() const { return pending_.size(); }

   private:
    Tokenizer tokenizer_;
    bool skip_special_;
    std::string pending_;
};

}  // namespace deepinfer::tokenizer
