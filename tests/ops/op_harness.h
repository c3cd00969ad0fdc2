// Op-vs-reference harness for the kernel tables (in the manner of ggml's test-backend-ops): every table
// this CPU runs is compared with backend/ref on the same inputs, outputs live between guard bytes and
// are poisoned before the call, and each op has an error budget stated in its comparison.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/kernels.h"
#include "core/numeric.h"
#include "core/thread_pool.h"

namespace deepinfer::testing {

// The SIMD tables this CPU supports (the registry falls back when one is missing, so compare isa fields).
inline std::vector<const backend::Kernels*> simd_tables() {
    std::vector<const backend::Kernels*> tables;
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        const backend::Kernels& k = backend::kernels_for(isa);
        if (k.isa == isa) tables.push_back(&k);
    }
    return tables;
}

// `count` elements of T between two guard zones of kGuardBytes; everything starts as a fixed byte
// pattern, so unwritten outputs and out-of-bounds writes are both visible.
template <class T>
class Guarded {
   public:
    static constexpr size_t kGuardBytes = 256;
    static constexpr uint8_t kPattern = 0xa7;
    explicit Guarded(size_t count) : count_(count), bytes_(kGuardBytes * 2 + count * sizeof(T) + 64, kPattern) {}
    T* data() { return reinterpret_cast<T*>(base()); }
    const T* data() const { return reinterpret_cast<const T*>(base()); }
    size_t size() const { return count_; }
    bool guards_intact() const {
        const uint8_t* b = base();
        for (size_t i = 1; i <= kGuardBytes; ++i)
            if (b[-static_cast<ptrdiff_t>(i)] != kPattern) return false;
        for (size_t i = 0; i < kGuardBytes; ++i)
            if (b[count_ * sizeof(T) + i] != kPattern) return false;
        return true;
    }
    // True when element i still holds the initial pattern (it was never written).
    bool untouched(size_t i) const {
        const uint8_t* b = base() + i * sizeof(T);
        for (size_t j = 0; j < sizeof(T); ++j)
            if (b[j] != kPattern) return false;
        return true;
    }

   private:
    // 64-byte aligned start after the leading guard (kernels may use aligned stores on their scratch,
    // never on outputs, but aligned outputs keep the test independent of that).
    const uint8_t* base() const {
        auto p = reinterpret_cast<uintptr_t>(bytes_.data()) + kGuardBytes;
        return reinterpret_cast<const uint8_t*>((p + 63) & ~uintptr_t{63});
    }
    uint8_t* base() { return const_cast<uint8_t*>(static_cast<const Guarded*>(this)->base()); }
    size_t count_;
    std::vector<uint8_t> bytes_;
};

// A 2-D output [rows, cols] with row stride ld >= cols: the padding columns must stay untouched.
template <class T>
struct Output2d {
    int64_t rows, cols, ld;
    Guarded<T> buf;
    Output2d(int64_t r, int64_t c, int64_t l)
        : rows(r), cols(c), ld(l), buf(static_cast<size_t>(r > 0 ? (r - 1) * l + c : 0)) {}
    T* data() { return buf.data(); }
    // Empty string when the guards and the padding columns are intact and every element was written.
    std::string integrity() const {
        if (!buf.guards_intact()) return "guard bytes around the output were overwritten";
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < ld && i * ld + j < static_cast<int64_t>(buf.size()); ++j) {
                const bool written = !buf.untouched(static_cast<size_t>(i * ld + j));
                if (j < cols && !written)
                    return "output [" + std::to_string(i) + ", " + std::to_string(j) + "] not written";
                if (j >= cols && written)
                    return "padding [" + std::to_string(i) + ", " + std::to_string(j) + "] overwritten";
            }
        return "";
    }
};

// Distance in bf16 units in the last place (ordered-integer distance; NaN vs NaN is 0, NaN vs number huge).
inline int64_t bf16_ulps(bf16 a, bf16 b) {
    const bool na = (a.bits & 0x7fff) > 0x7f80, nb = (b.bits & 0x7fff) > 0x7f80;
    if (na || nb) return na && nb ? 0 : (int64_t{1} << 20);
    auto ordered = [](uint16_t v) {
        return (v & 0x8000) ? -static_cast<int64_t>(v & 0x7fff) : static_cast<int64_t>(v);
    };
    return std::llabs(ordered(a.bits) - ordered(b.bits));
}

// Budget for bf16 outputs: every element within max_ulps of the reference, and at most
// 1 + max_rate * count of them different at all (one stray rounding is allowed even in tiny cases).
struct UlpBudget {
    int64_t max_ulps;
    double max_rate;
};
struct UlpStats {
    int64_t worst = 0, mismatches = 0, count = 0;
    std::string where;
};

// How far, relative to its products' magnitudes, a sum in another order may be off where it cancels
// (compare_bf16_sums): k = 8192 products summed in fp32 in two orders differ by ~sqrt(k) units of 2^-24 of the
// magnitudes typically, 2^-11 at the very worst.
inline constexpr double kSumOrderRel = 0x1p-16;

// compare_bf16 for sums of products taken in another order than the reference's: where a sum cancels, its fp32
// rounding errors (a few units of 2^-24 of the products' magnitudes, in either order) can move the bf16 result by
// several ulps. An output more than 1 ulp off counts as 1 ulp when it lies within rel x magnitude (sum |a_k w_k|,
// magnitude[i * ld_mag + j]) plus one bf16 ulp of the larger of the two; a kernel error of any size beyond that
// counts in full. (Where nothing cancels, rel x magnitude is far below an ulp: the plain budget holds.) Null
// magnitude: plain ulps (compare_bf16).
inline UlpStats compare_bf16_sums(const bf16* ref, int64_t ld_ref, const bf16* got, int64_t ld_got, int64_t rows,
                                  int64_t cols, const bf16* magnitude, int64_t ld_mag, double rel) {
    UlpStats s;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            const bf16 r = ref[i * ld_ref + j], g = got[i * ld_got + j];
            int64_t u = bf16_ulps(r, g);
            if (u > 1 && magnitude) {
                const double rv = bf16_to_float(r), gv = bf16_to_float(g);
                int e = 0;
                std::frexp(std::max(std::fabs(rv), std::fabs(gv)), &e);  // the larger lies in [2^(e-1), 2^e)
                const double allowed = rel * bf16_to_float(magnitude[i * ld_mag + j]) + std::ldexp(1.0, e - 8);
                if (std::fabs(rv - gv) <= allowed) u = 1;
            }
            ++s.count;
            if (u != 0) ++s.mismatches;
            if (u > s.worst) {
                s.worst = u;
                s.where = fmt::format("[{}, {}] ref {} got {}", i, j, bf16_to_float(r), bf16_to_float(g));
            }
        }
    return s;
}
// Every output's distance from the reference in bf16 ulps.
inline UlpStats compare_bf16(const bf16* ref, int64_t ld_ref, const bf16* got, int64_t ld_got, int64_t rows,
                             int64_t cols) {
    return compare_bf16_sums(ref, ld_ref, got, ld_got, rows, cols, nullptr, 0, 0.0);
}
// The operands' absolute values, for the magnitudes: e4m3 codes, pairs of e2m1 codes, bf16 values.
inline std::vector<uint8_t> abs_e4m3(const uint8_t* codes, size_t count) {
    std::vector<uint8_t> out(codes, codes + count);
    for (uint8_t& c : out) c &= 0x7f;
    return out;
}
inline std::vector<uint8_t> abs_e2m1_pairs(const uint8_t* packed, size_t bytes) {
    std::vector<uint8_t> out(packed, packed + bytes);
    for (uint8_t& c : out) c &= 0x77;
    return out;
}
inline std::vector<bf16> abs_bf16(const bf16* x, size_t count) {
    std::vector<bf16> out(x, x + count);
    for (bf16& v : out) v.bits &= 0x7fff;
    return out;
}

// Empty when within budget, else a description.
inline std::string check_ulps(const UlpStats& s, const UlpBudget& b) {
    if (s.worst > b.max_ulps)
        return "max " + std::to_string(s.worst) + " bf16 ulps (budget " + std::to_string(b.max_ulps) + ") at " +
               s.where;
    const int64_t allowed = b.max_rate > 0 ? 1 + static_cast<int64_t>(b.max_rate * static_cast<double>(s.count)) : 0;
    if (s.mismatches > allowed)
        return std::to_string(s.mismatches) + " of " + std::to_string(s.count) + " outputs differ (budget " +
               std::to_string(allowed) + ")";
    return "";
}

// Normalized mean squared error sum (a-b)^2 / sum a^2 (0 when both are all zero).
inline double nmse(const std::vector<double>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += a[i] * a[i];
    }
    return den == 0 ? num : num / den;
}

// Deterministic inputs.
class Inputs {
   public:
    explicit Inputs(uint64_t seed) : rng_(seed) {}
    float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
    int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    std::vector<bf16> bf16s(size_t n, float lo = -1.0f, float hi = 1.0f) {
        std::vector<bf16> v(n);
        for (auto& x : v) x = float_to_bf16(uniform(lo, hi));
        return v;
    }
    std::vector<float> floats(size_t n, float lo = -1.0f, float hi = 1.0f) {
        std::vector<float> v(n);
        for (auto& x : v) x = uniform(lo, hi);
        return v;
    }
    // Finite e4m3 codes (no NaN).
    std::vector<uint8_t> e4m3_codes(size_t n) {
        std::vector<uint8_t> v(n);
        for (auto& c : v) {
            do c = static_cast<uint8_t>(uniform_int(0, 255));
            while ((c & 0x7f) == 0x7f);
        }
        return v;
    }
    // e4m3 codes as a quantized weight has them, without subnormals: normal codes of every exponent (the
    // largest, 0x7e / 0xfe, included) and about one zero in 64 (either sign).
    std::vector<uint8_t> e4m3_normal_codes(size_t n) {
        std::vector<uint8_t> v(n);
        for (auto& c : v) {
            const int sign = uniform_int(0, 1) << 7;
            if (uniform_int(0, 63) == 0) c = static_cast<uint8_t>(sign);
            else c = static_cast<uint8_t>(sign | uniform_int(0x08, 0x7e));
        }
        return v;
    }
    std::vector<uint8_t> bytes(size_t n, int lo = 0, int hi = 255) {
        std::vector<uint8_t> v(n);
        for (auto& c : v) c = static_cast<uint8_t>(uniform_int(lo, hi));
        return v;
    }
    std::mt19937_64& rng() { return rng_; }

   private:
    std::mt19937_64 rng_;
};

// Activations as the model makes them: act_quant (scalar reference) of bf16 rows whose 32-column groups have
// magnitudes spread over 2^-12..2^8. codes [n, k], scales [n, k/32].
struct QuantizedActs {
    std::vector<uint8_t> codes, scales;
    int64_t n, k;
    QuantizedActs(Inputs& in, int64_t n_, int64_t k_) : codes(n_ * k_), scales(n_ * k_ / 32), n(n_), k(k_) {
        std::vector<bf16> x(n * k);
        for (int64_t g = 0; g < n * k / 32; ++g) {
            const float mag = std::ldexp(1.0f, in.uniform_int(-12, 8));
            for (int j = 0; j < 32; ++j) x[g * 32 + j] = float_to_bf16(in.uniform(-mag, mag));
        }
        ThreadPool pool(1);
        backend::ref::kernels().act_quant(x.data(), n, k, codes.data(), scales.data(), pool);
    }
    backend::Fp8Acts all() const { return rows(0, n); }
    // Rows [start, start + count) as a view.
    backend::Fp8Acts rows(int64_t start, int64_t count) const {
        return backend::Fp8Acts{codes.data() + start * k, scales.data() + start * (k / 32), count, k};
    }
};

// fp8 operands at the edges of the AVX-512 AMX kernel's window (gemm_fp8_amx.cpp): it keeps an activation row on
// the tiles when its values' exponents span at most 68 binades (up to 17 of them the e4m3 codes' own), and a pair
// of weight row groups (one row of 32x32 weight scales) when its scale codes span at most 52; the others go to
// the vdpbf16ps kernel. Activation row r's block scales alternate between two codes 48 apart (kept) where
// r % 3 == 1, 90 apart (sent) where r % 3 == 2; weight scale row 0 spans 52 codes (kept), row 1 53 (sent), row 2
// holds the NaN code 255.
inline void widen_fp8_scales(QuantizedActs& acts, std::vector<uint8_t>& w_scales, int64_t w_scale_rows) {
    const int64_t kb_count = acts.k / 32;
    for (int64_t r = 0; r < acts.n; ++r)
        for (int64_t kb = 0; r % 3 != 0 && kb < kb_count; ++kb)
            acts.scales[r * kb_count + kb] = static_cast<uint8_t>(kb % 2 ? 60 : (r % 3 == 1 ? 108 : 150));
    const int span[2] = {52, 53};
    for (int64_t j = 0; j < std::min<int64_t>(w_scale_rows, 3); ++j)
        for (int64_t kb = 0; kb < kb_count; ++kb)
            w_scales[j * kb_count + kb] =
                static_cast<uint8_t>(j == 2 ? (kb == 1 ? 255 : 120) : 80 + (kb % 3 == 2 ? span[j] : kb % 3 * 20));
}

// MXFP4 operands at the edges of the AVX-512 AMX kernel's window (gemm_fp4_amx_sums.cpp): it sums a row over all
// of k on the tiles when every nonzero |a sa| lies in [2^-60, 2^50), and a pair of weight row groups when every
// scale code lies in 68..174 (|w sw| in [2^-60, 2^50)); other rows and pairs take the per-block kernel. Activation
// row r % 5: 1 holds 448 * 2^41 (kept), 2 448 * 2^42 (sent), 3 2^-9 * 2^-51 (kept), 4 2^-9 * 2^-52 (sent), each in
// its block 0; weight pair 0 holds codes 68 and 174 (kept), pair 1 a 67, pair 2 a 175 (sent).
inline void edge_fp4_operands(QuantizedActs& acts, std::vector<uint8_t>& w_scales, int64_t w_rows) {
    const int64_t kb_count = acts.k / 32;
    static constexpr uint8_t kCode[5] = {0, 0x7e, 0x7e, 0x01, 0x01}, kScale[5] = {0, 168, 169, 76, 75};
    for (int64_t r = 0; r < acts.n; ++r)
        if (r % 5 != 0) {
            acts.codes[r * acts.k + 3] = kCode[r % 5];
            acts.scales[r * kb_count] = kScale[r % 5];
        }
    const uint8_t edges[][2] = {{68, 174}, {67, 120}, {175, 120}};
    for (int64_t p = 0; p < 3 && 32 * p + 31 < w_rows; ++p)
        for (int j = 0; j < 2; ++j) w_scales[(32 * p + 5 + 17 * j) * kb_count + j % kb_count] = edges[p][j];
}

}  // namespace deepinfer::testing
