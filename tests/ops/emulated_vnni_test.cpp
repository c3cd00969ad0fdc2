// The emulated AVX-VNNI dot products (src/backend/cpu/x86/avx2/emulated_vnni.h) give the instructions' integers: the
// emulated build (preset avx512emu) checks the AVX2 table's AvxVnni form through them, so an emulation that widened,
// paired or wrapped differently would pass or fail those tests for the wrong reason. Built in every configuration (the
// header is AVX2 code); where the CPU has AVX-VNNI, the instructions themselves are compared too.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/x86/avx2/emulated_vnni.h"

namespace {

using deepinfer::backend::cpu::avx2::emulated_vnni::dpbusd;

struct Lanes {
    int32_t acc[8];
    uint8_t a[32];  // vpdpbusd: unsigned bytes; vpdpwssd: 16 int16 words
    uint8_t b[32];  // vpdpbusd: signed bytes; vpdpwssd: the broadcast dword's two words
};

__m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The instructions' definitions (Intel SDM): acc + the products' sum, each product exact, the lane wrapping mod 2^32.
int32_t wrap(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }
int32_t dpbusd_lane(const Lanes& l, int i) {
    int64_t sum = l.acc[i];
    for (int j = 0; j < 4; ++j) sum += int64_t{l.a[4 * i + j]} * static_cast<int8_t>(l.b[4 * i + j]);
    return wrap(sum);
}
int32_t dpwssd_lane(const Lanes& l, int i) {
    int16_t w[16], x[2];
    std::memcpy(w, l.a, sizeof(w));
    std::memcpy(x, l.b, sizeof(x));
    return wrap(int64_t{l.acc[i]} + int64_t{w[2 * i]} * x[0] + int64_t{w[2 * i + 1]} * x[1]);
}

// Random lanes, then the corners: the largest products of both signs and sums that wrap.
std::vector<Lanes> cases() {
    std::mt19937 rng(20261207);
    std::vector<Lanes> out;
    for (int n = 0; n < 2000; ++n) {
        Lanes l;
        for (auto& v : l.acc) v = static_cast<int32_t>(rng());
        for (auto& v : l.a) v = static_cast<uint8_t>(rng());
        for (auto& v : l.b) v = static_cast<uint8_t>(rng());
        out.push_back(l);
    }
    for (uint8_t a : {0x00, 0x7f, 0x80, 0xff})
        for (uint8_t b : {0x00, 0x7f, 0x80, 0xff})
            for (int32_t acc : {0, INT_MAX, INT_MIN, -1}) {
                Lanes l;
                for (auto& v : l.acc) v = acc;
                std::memset(l.a, a, sizeof(l.a));
                std::memset(l.b, b, sizeof(l.b));
                out.push_back(l);
            }
    return out;
}

TEST(EmulatedVnni, DpbusdIsTheInstructionsSum) {
    for (const Lanes& l : cases()) {
        int32_t got[8];
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(got), dpbusd(load(l.acc), load(l.a), load(l.b)));
        for (int i = 0; i < 8; ++i) ASSERT_EQ(got[i], dpbusd_lane(l, i)) << "lane " << i;
    }
}

// The assembly form, as the panel GEMM's loops use it: x broadcast from src, used up and broadcast again.
TEST(EmulatedVnni, AsmDpwssdIsTheInstructionsSum) {
    for (const Lanes& l : cases()) {
        __m256i s = load(l.acc), x;
        const __m256i w = load(l.a);
        __asm__("vpbroadcastd %[src], %[x]\n\t" DEEPINFER_EMULATED_VPDPWSSD("%[src]", "%[x]", "%[w]", "%[s]")
                : [s] "+x"(s), [x] "=&x"(x)
                : [w] "x"(w), [src] "m"(*reinterpret_cast<const int32_t*>(l.b)));
        int32_t got[8], again[8];
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(got), s);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(again), x);
        for (int i = 0; i < 8; ++i) {
            ASSERT_EQ(got[i], dpwssd_lane(l, i)) << "lane " << i;
            ASSERT_EQ(std::memcmp(&again[i], l.b, 4), 0) << "x not broadcast again, lane " << i;
        }
    }
}

__attribute__((target("avxvnni"))) __m256i native_dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    return _mm256_dpbusd_avx_epi32(acc, u8, s8);
}

TEST(EmulatedVnni, DpbusdMatchesTheInstructionWhereTheCpuHasIt) {
    if (!__builtin_cpu_supports("avxvnni")) GTEST_SKIP() << "no AVX-VNNI on this CPU";
    for (const Lanes& l : cases()) {
        int32_t got[8], want[8];
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(got), dpbusd(load(l.acc), load(l.a), load(l.b)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(want), native_dpbusd(load(l.acc), load(l.a), load(l.b)));
        ASSERT_EQ(std::memcmp(got, want, sizeof(got)), 0);
    }
}

}  // namespace
