// Splits generated text into reasoning_content and content for DeepSeek thinking mode: when the prompt leaves
// <think> open, everything up to </think> is reasoning and the rest is content (vLLM's DeepSeek reasoning
// parser does the same on text). Works on streamed deltas: a tail that could be the start of </think> is held
// back until the next delta decides it, so no delta ever carries part of the marker.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::server {

struct SplitDelta {
    std::string reasoning;
    std::string content;
};

class ReasoningSplitter {
   public:
    // in_reasoning: whether the output starts inside reasoning (tokenizer::prompt_opens_reasoning).
    explicit ReasoningSplitter(bool in_reasoning);

    // The parts of `delta` that are final now.
    SplitDelta push(std::string_view delta);
    // End of the output: whatever was held back (a partial marker is text, not a marker).
    SplitDelta finish();

    bool in_reasoning() const { return in_reasoning_; }
    // True once the output entered reasoning mode at all (the response then carries reasoning_content).
    bool had_reasoning() const { return had_reasoning_; }

   private:
    bool in_reasoning_;
    bool had_reasoning_;
    bool at_start_ = true;  // a leading <think> of the output itself is dropped (some models repeat it)
    std::string pending_;   // held back: a possible prefix of the marker being looked for
};

}  // namespace deepinfer::server
