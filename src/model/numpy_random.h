// NumPy's default_rng(seed).integers(0, high, n, dtype=int64), reimplemented bit for bit: SeedSequence
// entropy mixing, PCG64 (XSL-RR 128/64) and Lemire's bounded integers. The Engram hash multipliers
// (spec §5.5.1) come from this generator, so a config with other layer ids or another compressed
// vocabulary needs it to hash exactly as the reference does.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::model {

class NumpyPcg64 {
   public:
    // Equivalent to np.random.default_rng(seed) for a non-negative integer seed.
    explicit NumpyPcg64(uint64_t seed);
    uint64_t next_uint64();
    // Equivalent to .integers(low=0, high=high, size=n, dtype=np.int64) for high > 2^32.
    std::vector<int64_t> integers(int64_t high, int n);

   private:
    unsigned __int128 state_ = 0, inc_ = 0;
};

}  // namespace deepinfer::model
