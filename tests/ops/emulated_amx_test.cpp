// The emulated AMX tiles (src/backend/cpu/x86/avx512/emulated_amx.h) behave as the tile unit does where the AMX
// kernels depend on it: the emulated builds (presets amxemu, avx512emu) check those kernels through them. Built in
// every configuration (the header is plain C++); where the build emulates the tiles, the kernel table must also
// take the kernels an AMX machine takes (the MXFP4 sums over k need the unit's one rounding per tdpbf16ps).
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/x86/avx512/emulated_amx.h"
#include "backend/kernels.h"
#include "core/cpu_features.h"
#include "core/env.h"
#include "core/numeric.h"

namespace {

namespace amx = deepinfer::emulated_amx;

// (every value below is exact in bf16)
uint16_t bf16_bits(float f) { return deepinfer::float_to_bf16(f).bits; }

// Palette 1 with tile t of rows[t] rows of bytes[t] bytes (the layout of amx_tiles.h's TileConfig).
void configure(const int (&rows)[3], const int (&bytes)[3]) {
    alignas(64) uint8_t config[64] = {};
    config[0] = 1;
    for (int t = 0; t < 3; ++t) {
        config[16 + 2 * t] = static_cast<uint8_t>(bytes[t]);
        config[17 + 2 * t] = static_cast<uint8_t>(bytes[t] >> 8);
        config[48 + t] = static_cast<uint8_t>(rows[t]);
    }
    _tile_loadconfig(config);
}

// C (tile 0) += A (tile 1, bf16 pairs) x B (tile 2, bf16 pairs), all 16 x 64 bytes: C[m][n] from A row m's 32 values
// and B's column n (row k holds columns' pairs 2k, 2k + 1).
struct Product {
    alignas(64) float c[16][16] = {};
    alignas(64) uint16_t a[16][32] = {}, b[16][32] = {};
    void run() {
        configure({16, 16, 16}, {64, 64, 64});
        _tile_loadd(0, c, 64);
        _tile_loadd(1, a, 64);
        _tile_loadd(2, b, 64);
        _tile_dpbf16ps(0, 1, 2);
        _tile_stored(0, c, 64);
        _tile_release();
    }
};

// One rounding of C + (all of the instruction's products), as the Xeon's unit gives where the partial sums are exact:
// 1 + 2^-24 + 2^-24 is 1 + 2^-23; pair by pair it would round to 1 twice.
TEST(EmulatedAmx, DotRoundsCPlusAllProductsOnce) {
    Product p;
    p.c[0][0] = 1.0f;
    p.a[0][0] = p.a[0][1] = bf16_bits(0x1p-12f);
    p.b[0][0] = p.b[0][1] = bf16_bits(0x1p-12f);  // column 0's pair from row 0
    p.run();
    EXPECT_EQ(p.c[0][0], 1.0f + 0x1p-23f);
    EXPECT_EQ(p.c[0][1], 0.0f);
}

// bf16 denormal operands count as zero, denormal results flush to zero.
TEST(EmulatedAmx, DotFlushesDenormals) {
    Product p;
    p.a[0][0] = 0x0001;  // the smallest bf16 denormal
    p.b[0][0] = bf16_bits(0x1p100f);
    p.a[1][0] = bf16_bits(0x1p-70f);
    p.b[0][2] = bf16_bits(0x1p-70f);  // row 1, column 1: 2^-140
    p.run();
    EXPECT_EQ(p.c[0][0], 0.0f);
    EXPECT_EQ(p.c[1][1], 0.0f);
}

// Loads fill the configured rows and bytes and zero the rest; stores write only the configured part; the products
// run over the configured k (A's bytes per row / 4 pairs).
TEST(EmulatedAmx, ConfiguredShapes) {
    alignas(64) float c[16][16];
    alignas(64) uint16_t a[16][32], b[16][32];
    for (auto& row : a)
        for (auto& v : row) v = bf16_bits(1.0f);
    for (auto& row : b)
        for (auto& v : row) v = bf16_bits(1.0f);
    for (auto& row : c)
        for (auto& v : row) v = 7.0f;
    configure({2, 2, 2}, {8, 8, 8});  // C: 2 rows x 2 columns; A: 2 rows x 2 pairs; B: 2 rows (k) x 2 columns' pairs
    _tile_loadd(0, c, 64);
    _tile_loadd(1, a, 64);
    _tile_loadd(2, b, 64);
    _tile_dpbf16ps(0, 1, 2);
    alignas(64) float out[16][16];
    for (auto& row : out)
        for (auto& v : row) v = -1.0f;
    _tile_stored(0, out, 64);
    _tile_release();
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 16; ++n) EXPECT_EQ(out[m][n], m < 2 && n < 2 ? 7.0f + 4.0f : -1.0f) << m << "," << n;
}

#ifdef DEEPINFER_EMULATE_AMX
// The emulated build takes the tile kernels an AMX machine takes, the MXFP4 sums over all of k among them.
TEST(EmulatedAmx, TableTakesTheTileKernels) {
    if (deepinfer::env::forced_amx() == "off") GTEST_SKIP() << "DEEPINFER_AMX=off";
    ASSERT_TRUE(deepinfer::amx_enabled());
    EXPECT_TRUE(deepinfer::backend::cpu::avx512_fp4_sums_on_tiles());
}
#endif

}  // namespace
