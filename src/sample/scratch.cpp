// Scratch buffers for the sampler (see scratch.h).
#include "sample/scratch.h"

#include <algorithm>

namespace deepinfer::sample {

namespace {
template <typename T>
void grow(std::vector<T>& v, int32_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}
}  // namespace

void Scratch::reserve(int32_t vocab_size) {
    grow(work_, vocab_size);
    grow(exps_, vocab_size);
    grow(values_, vocab_size);
    ids_.reserve(static_cast<size_t>(vocab_size));
    grow(stamps_, vocab_size);
    grow(counts_, vocab_size);
}

std::vector<float>& Scratch::work(int32_t vocab_size) {
    grow(work_, vocab_size);
    return work_;
}

std::vector<float>& Scratch::exps(int32_t vocab_size) {
    grow(exps_, vocab_size);
    return exps_;
}

std::vector<float>& Scratch::values(int32_t vocab_size) {
    grow(values_, vocab_size);
    return values_;
}

std::vector<int32_t>& Scratch::counts(int32_t vocab_size) {
    grow(counts_, vocab_size);
    return counts_;
}

void Scratch::begin_epoch(int32_t vocab_size) {
    grow(stamps_, vocab_size);
    ++epoch_;
    // After 2^32 epochs a stale stamp could equal the new epoch: clear once and restart from 1.
    if (epoch_ == 0) {
        std::fill(stamps_.begin(), stamps_.end(), 0u);
        epoch_ = 1;
    }
}

}  // namespace deepinfer::sample
