// Reusable per-thread buffers for one sampling step, so that a step over the 129,280-token vocabulary does
// no allocation once warm. One Scratch per sampling thread; contents do not survive between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer::sample {

class Scratch {
   public:
    Scratch() = default;
    explicit Scratch(int32_t vocab_size) { reserve(vocab_size); }

    // Grow every buffer to hold vocab_size entries (never shrinks).
    void reserve(int32_t vocab_size);

    // fp32 [vocab]: working copy of the logits (sample_token keeps the caller's raw logits untouched).
    std::vector<float>& work(int32_t vocab_size);
    // fp32 [vocab]: exp(x - max) of the candidates during filtering; only candidate entries are valid.
    std::vector<float>& exps(int32_t vocab_size);
    // fp32 [vocab]: a contiguous copy of values for selection (nth_element on floats, not on ids).
    std::vector<float>& values(int32_t vocab_size);
    // fp32 [<= vocab]: working memory of kth_largest (select.h).
    std::vector<float>& selection() { return selection_; }
    // int32 [<= vocab]: candidate token ids; callers resize it to what they use.
    std::vector<int32_t>& ids() { return ids_; }

    // A fresh "seen" epoch over a vocab-sized stamp array: mark(id) returns true the first time id is
    // marked in this epoch. Avoids clearing a vocab-sized array for every step (O(tokens), not O(vocab)).
    void begin_epoch(int32_t vocab_size);
    bool mark(int32_t id) {
        if (stamps_[static_cast<size_t>(id)] == epoch_) return false;
        stamps_[static_cast<size_t>(id)] = epoch_;
        return true;
    }

    // int32 [vocab], all zero between uses: occurrence counts; whoever increments entries resets them.
    std::vector<int32_t>& counts(int32_t vocab_size);

   private:
    std::vector<float>    work_;
    std::vector<float>    exps_;
    std::vector<float>    values_;
    std::vector<float>    selection_;
    std::vector<int32_t>  ids_;
    std::vector<uint32_t> stamps_;
    uint32_t              epoch_ = 0;
    std::vector<int32_t>  counts_;
};

}  // namespace deepinfer::sample
