// Rotary position embedding (spec §4.6): per-layer-kind frequency tables (plain theta, or YaRN with
// compress_rope_theta), angles formed as the fp32 product t * freq before cos/sin, adjacent-lane pairs
// rotated in fp32 and written back as bf16; the inverse uses the conjugate.
#pragma once

#include <cstdint>
#include <vector>

#include "core/numeric.h"

namespace deepinfer::ops {

struct RopeParams {
    int rope_dim = 64;
    double base = 10000.0;
    int64_t original_seq_len = 0;  // > 0 enables YaRN
    double factor = 1.0;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
};

class Rope {
   public:
    Rope() = default;
    explicit Rope(const RopeParams& params);

    int rope_dim() const { return rope_dim_; }
    const std::vector<float>& freqs() const { return freqs_; }
    // cos/sin [rope_dim/2] of position pos.
    void angles(int64_t pos, float* cos_out, float* sin_out) const;
    // Rotate `count` vectors of stride `stride` elements; each vector's rope lanes start at x + v*stride.
    void apply(bf16* x, int64_t count, int64_t stride, int64_t pos, bool inverse) const;
    // apply() to n rows of row_stride elements from x, row i at positions[i]; rows over the pool from
    // kParallelRows (ops/elementwise.h).
    void apply_rows(bf16* x, int64_t n, int64_t row_stride, int64_t count, int64_t stride, const int64_t* positions,
                    bool inverse) const;

   private:
    int rope_dim_ = 0;
    std::vector<float> freqs_;
};

}  // namespace deepinfer::ops
