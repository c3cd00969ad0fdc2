// HF pre-tokenizers (tokenizer.json "pre_tokenizer") for byte-level BPE: a Sequence of Split steps (regex or
// literal pattern, the five split behaviors, invert) ending with ByteLevel (optional prefix space, optional
// GPT-2 regex). Pre-tokens come out as byte ranges of the input; ByteLevel's symbol mapping is left to the
// BPE model, which works on bytes directly.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "tokenizer/onig_regex.h"

namespace deepinfer::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Reusable buffers of one split() call; keep one per thread to avoid allocations.
struct PreTokenizerScratch {
    std::vector<std::string_view> current, next;
    std::vector<MatchSpan> matches;
    std::vector<std::pair<MatchSpan, bool>> marked;
    std::deque<std::string> owned;  // pieces that got a prefix space; deque keeps their addresses stable
};

class PreTokenizer {
   public:
    // Parses a tokenizer.json "pre_tokenizer" value. The last step must be ByteLevel (this engine runs
    // byte-level BPE only); other types give kUnsupported naming them.
    static Expected<PreTokenizer> from_json(const nlohmann::json& spec);

    // Splits valid UTF-8 `text` into non-empty pre-tokens, in order, appended to `out`. The views point into
    // `text` or into `scratch.owned` and stay valid until the next call with the same scratch.
    Status split(std::string_view text, PreTokenizerScratch& scratch, std::vector<std::string_view>& out) const;

   private:
    struct SplitStep {
        Regex regex;
        SplitBehavior behavior;
        bool invert;
    };
    std::vector<SplitStep> splits_;
    bool add_prefix_space_ = false;
    std::vector<Regex> byte_level_regex_;  // GPT-2 pattern when ByteLevel.use_regex, else empty
};

}  // namespace deepinfer::tokenizer
