// The AVX-512 table's flags-only MXFP4 activation rows (IsaOps::prep_fp4_flags, fp4_flags_avx512.cpp) against the
// whole integer form (prep_fp4_row): per block, the same kFp4SumsExact bit -- the one part of the form the AMX
// MXFP4 GEMMs read of a row inside their window -- on codes that put blocks on both sides of the bound.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/x86/isa_ops.h"
#include "backend/kernels.h"

namespace deepinfer::backend::cpu {
namespace {

// One 32-code block of e4m3 codes of the given kind.
void fill_block(std::mt19937& rng, int kind, uint8_t* b) {
    auto byte = [&] { return static_cast<uint8_t>(rng()); };
    auto sign = [&] { return static_cast<uint8_t>(rng() & 0x80); };
    for (int i = 0; i < 32; ++i) b[i] = 0;
    switch (kind) {
        case 0:  // any byte, NaN codes (0x7f, 0xff) included
            for (int i = 0; i < 32; ++i) b[i] = byte();
            break;
        case 1:  // any number
            for (int i = 0; i < 32; ++i) do b[i] = byte(); while ((b[i] & 0x7f) == 0x7f);
            break;
        case 2: {  // one subnormal (v = 1 unit) and j of the largest (15 * 2^14 units each): j = 5 below, 6 above
            b[rng() % 32] = static_cast<uint8_t>(sign() | 1);
            const int j = 4 + static_cast<int>(rng() % 4);
            for (int n = 0; n < j; ++n) b[(7 * n + 3) % 32] = static_cast<uint8_t>(sign() | 0x7e);
            break;
        }
        case 3:  // zeros of both signs
            for (int i = 0; i < 32; ++i) b[i] = sign();
            break;
        default: {  // a smallest exponent e and values up to 14 binades above it
            const int e = 1 + static_cast<int>(rng() % 3);
            for (int i = 0; i < 32; ++i) {
                const int ei = e + static_cast<int>(rng() % 14);
                b[i] = static_cast<uint8_t>(sign() | (std::min(ei, 15) << 3) | (rng() % 8));
                if ((b[i] & 0x7f) == 0x7f) b[i] &= 0xfe;
            }
        }
    }
}

TEST(Fp4RowFlags, AreTheIntegerFormsSumsExactBits) {
    if (avx512_kernels() == nullptr) GTEST_SKIP() << "no AVX-512 table here";
    const IsaOps& ops = avx512_ops();
    ASSERT_NE(ops.prep_fp4_flags, nullptr);
    std::mt19937 rng(7);
    int exact = 0, inexact = 0;
    for (int64_t k : {32, 64, 2304, 5120}) {
        const int64_t kb_count = k / 32;
        const Fp4RowLayout layout = fp4_row_layout(kb_count);
        std::vector<uint8_t> codes(static_cast<size_t>(k));
        for (int round = 0; round < 8; ++round) {
            for (int64_t kb = 0; kb < kb_count; ++kb) fill_block(rng, static_cast<int>(rng() % 5), &codes[32 * kb]);
            std::vector<uint8_t> whole(static_cast<size_t>(layout.bytes)), flags(whole.size(), 0xcc);
            ops.prep_fp4_row(codes.data(), k, 16, whole.data());
            ops.prep_fp4_flags(codes.data(), k, flags.data());
            for (int64_t kb = 0; kb < kb_count; ++kb) {
                const uint8_t want = whole[static_cast<size_t>(layout.exact + kb)] & kFp4SumsExact;
                ASSERT_EQ(flags[static_cast<size_t>(layout.exact + kb)], want) << "k=" << k << " block " << kb;
                (want ? exact : inexact) += 1;
            }
        }
    }
    // both sides of the bound were seen
    EXPECT_GT(exact, 100);
    EXPECT_GT(inexact, 100);
}

}  // namespace
}  // namespace deepinfer::backend::cpu
