// Philox4x32-10 as specified by Random123 (constants and round structure from the paper; checked against
// its published known-answer vectors in tests/unit/sampler_rng_test.cpp).
#include "sample/request_rng.h"

#include <random>

namespace deepinfer::sample {

namespace {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

inline void mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
    const uint64_t product = static_cast<uint64_t>(a) * b;
    hi = static_cast<uint32_t>(product >> 32);
    lo = static_cast<uint32_t>(product);
}
}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> key) {
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            key[0] += kPhiloxW0;
            key[1] += kPhiloxW1;
        }
        uint32_t hi0, lo0, hi1, lo1;
        mul_hi_lo(kPhiloxM0, c[0], hi0, lo0);
        mul_hi_lo(kPhiloxM1, c[2], hi1, lo1);
        c = {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
    }
    return c;
}

RequestRng RequestRng::from_seed(std::optional<uint64_t> seed, uint32_t stream) {
    if (seed) return RequestRng(*seed, stream);
    std::random_device device;
    const uint64_t fresh = (static_cast<uint64_t>(device()) << 32) | device();
    return RequestRng(fresh, stream);
}

double RequestRng::uniform_at(uint64_t step, uint32_t k) const {
    // Counter words: (k, stream, step low, step high); key: the 64-bit seed. Distinct (stream, step, k)
    // are distinct counters, hence independent blocks.
    const std::array<uint32_t, 4> block = philox4x32_10(
        {k, stream_, static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)},
        {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
    const uint64_t bits = (static_cast<uint64_t>(block[0]) << 32) | block[1];
    return static_cast<double>(bits >> 11) * 0x1.0p-53;  // top 53 bits -> [0, 1)
}

}  // namespace deepinfer::sample
