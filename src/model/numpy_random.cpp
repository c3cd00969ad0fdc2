// SeedSequence + PCG64 + bounded integers, following NumPy's published algorithms (bit_generator.pyx,
// pcg64.h, distributions.c).
#include "model/numpy_random.h"

#include <array>

#include "core/check.h"

namespace deepinfer::model {
namespace {

constexpr uint32_t kInitA = 0x43b0d7e5u, kMultA = 0x931e8875u, kInitB = 0x8b51f9ddu, kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu, kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t* hash_const) {
    value ^= *hash_const;
    *hash_const *= kMultA;
    value *= *hash_const;
    value ^= value >> kXShift;
    return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t result = kMixMultL * x - kMixMultR * y;
    result ^= result >> kXShift;
    return result;
}

// SeedSequence(seed).generate_state(4, uint64).
std::array<uint64_t, 4> seed_sequence_state(uint64_t seed) {
    std::vector<uint32_t> entropy;
    do {
        entropy.push_back(static_cast<uint32_t>(seed & 0xffffffffu));
        seed >>= 32;
    } while (seed != 0);
    std::array<uint32_t, kPoolSize> pool{};
    uint32_t hash_const = kInitA;
    for (int i = 0; i < kPoolSize; ++i)
        pool[i] = hashmix(i < static_cast<int>(entropy.size()) ? entropy[i] : 0u, &hash_const);
    for (int src = 0; src < kPoolSize; ++src)
        for (int dst = 0; dst < kPoolSize; ++dst)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], &hash_const));
    for (size_t src = kPoolSize; src < entropy.size(); ++src)
        for (int dst = 0; dst < kPoolSize; ++dst) pool[dst] = mix(pool[dst], hashmix(entropy[src], &hash_const));
    uint32_t words[8];
    uint32_t hash_b = kInitB;
    for (int i = 0; i < 8; ++i) {
        uint32_t v = pool[i % kPoolSize];
        v ^= hash_b;
        hash_b *= kMultB;
        v *= hash_b;
        v ^= v >> kXShift;
        words[i] = v;
    }
    std::array<uint64_t, 4> out;
    for (int i = 0; i < 4; ++i) out[i] = static_cast<uint64_t>(words[2 * i]) | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
    return out;
}

const unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;

}  // namespace

NumpyPcg64::NumpyPcg64(uint64_t seed) {
    auto s = seed_sequence_state(seed);
    unsigned __int128 initstate = (static_cast<unsigned __int128>(s[0]) << 64) | s[1];
    unsigned __int128 initseq = (static_cast<unsigned __int128>(s[2]) << 64) | s[3];
    state_ = 0;
    inc_ = (initseq << 1) | 1;
    state_ = state_ * kPcgMultiplier + inc_;
    state_ += initstate;
    state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyPcg64::next_uint64() {
    state_ = state_ * kPcgMultiplier + inc_;
    uint64_t value = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
    unsigned rot = static_cast<unsigned>(state_ >> 122);
    return (value >> rot) | (value << ((64 - rot) & 63));
}

std::vector<int64_t> NumpyPcg64::integers(int64_t high, int n) {
    DI_CHECK_MSG(high > (int64_t{1} << 32), "only the 64-bit Lemire path is implemented (high={})", high);
    const uint64_t rng = static_cast<uint64_t>(high) - 1;  // inclusive range [0, rng]
    const uint64_t rng_excl = rng + 1;
    std::vector<int64_t> out;
    for (int i = 0; i < n; ++i) {
        unsigned __int128 m = static_cast<unsigned __int128>(next_uint64()) * rng_excl;
        uint64_t leftover = static_cast<uint64_t>(m);
        if (leftover < rng_excl) {
            const uint64_t threshold = (UINT64_MAX - rng) % rng_excl;
            while (leftover < threshold) {
                m = static_cast<unsigned __int128>(next_uint64()) * rng_excl;
                leftover = static_cast<uint64_t>(m);
            }
        }
        out.push_back(static_cast<int64_t>(m >> 64));
    }
    return out;
}

}  // namespace deepinfer::model
