// Per-request randomness that does not depend on the batch: counter-based Philox4x32-10 (Salmon et al.,
// SC'11, "Random123"), keyed by the request seed. A draw is a pure function of (seed, stream, step, k), so
// the same seed gives the same tokens however requests are batched, chunked, preempted or recomputed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace deepinfer::sample {

// One Philox4x32-10 block: 4 random 32-bit words from a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class RequestRng {
   public:
    // seed: the request's seed. stream: which of the request's n completions (0..n-1); a separate counter
    // field rather than vLLM's "seed + index", so completion 1 of seed s never replays completion 0 of s+1.
    explicit RequestRng(uint64_t seed, uint32_t stream = 0) : seed_(seed), stream_(stream) {}

    // The request's seed, or a fresh one from the OS entropy source when the request gave none.
    static RequestRng from_seed(std::optional<uint64_t> seed, uint32_t stream = 0);

    uint64_t seed() const { return seed_; }
    uint32_t stream() const { return stream_; }

    // Draw k of step s, uniform in [0, 1) with 53 random bits; needs no sequential state. Convention:
    // step = the output position being sampled (number of tokens already generated for this completion),
    // k = 0 for the token sample itself (sample_token). Speculative decoding verifying the draft token at
    // output position s uses uniform_at(s, 0) for the token and other k (1, 2, ...) for accept tests, so
    // a verified token is reproducible without replaying earlier steps.
    double uniform_at(uint64_t step, uint32_t k) const;

    // Sequential draws: the next k of the current step (starting at k = 0 after set_step).
    void set_step(uint64_t step) {
        step_ = step;
        next_k_ = 0;
    }
    double uniform() { return uniform_at(step_, next_k_++); }

   private:
    uint64_t seed_;
    uint32_t stream_;
    uint64_t step_   = 0;
    uint32_t next_k_ = 0;
};

}  // namespace deepinfer::sample
