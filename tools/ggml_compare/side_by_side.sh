#!/bin/sh
# deepinfer bench-ops and ggml (llama.cpp's kernels) on the same shapes, in paired rounds (paired.py): each round
# runs each case in both engines back to back, swapping which goes first every round, and the table gives each
# cell's median ratio within the pairs and its range (the machine's bandwidth drifts within minutes).
#   tools/ggml_compare/side_by_side.sh GGML_SRC [WORK_DIR]
# GGML_SRC: a checkout of github.com/ggml-org/ggml (fetched, never committed). WORK_DIR (default
# /tmp/ggml-compare) receives ggml's build and the driver. Set ROUNDS (default 1) / ROWS / THREADS / ITERS /
# CASES (moe,w1,w2,wq_b,wo_b,wo_a,head) to change the runs,
# ISA=avx2 to build ggml for AVX2 (+FMA, F16C, BMI2) only and run deepinfer's AVX2 table without AVX-VNNI: both as
# on an AVX2-only CPU (Zen 3); ISA=avx2vnni for both with AVX-VNNI too, as on an E-core Xeon (Sierra Forest) or
# Alder Lake (a CPU with AVX-VNNI needed; keep a WORK_DIR per ISA); ISA=avx512nobf16 as on Ice Lake / Cascade Lake:
# ggml built for AVX-512 with VNNI and VBMI but no BF16 (what llama.cpp runs there), deepinfer's AVX2 table in its
# EVEX VNNI form (its AVX-512 table needs bf16; needs a CPU with AVX512-VNNI). PAGES=huge puts both engines'
# weights in 2 MB pages, PAGES=as-run each in the pages it gets where THP is madvise-only (deepinfer 2 MB, ggml
# 4 KB; default 4k: both in 4 KB pages; paired.py --pages).
set -e
SRC=${1:?usage: side_by_side.sh GGML_SRC [WORK_DIR]}
WORK=${2:-/tmp/ggml-compare}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DEEPINFER=${DEEPINFER:-$ROOT/build/release/tools/deepinfer}
ROWS=${ROWS:-1,4,16,64}
T=${THREADS:-2}
I=${ITERS:-3}
case "${ISA:-native}" in
  native) GGML_ISA="-DGGML_NATIVE=ON"; DI_ISA="" ;;
  avx2) GGML_ISA="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
        DI_ISA=avx2; export DEEPINFER_AVX_VNNI=off ;;
  avx2vnni) GGML_ISA="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_AVX_VNNI=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        GGML_ISA="$GGML_ISA -DGGML_BMI2=ON"; DI_ISA=avx2; export DEEPINFER_AVX_VNNI=on ;;
  avx512nobf16) GGML_ISA="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
        GGML_ISA="$GGML_ISA -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=OFF"
        DI_ISA=avx2; export DEEPINFER_AVX_VNNI=evex ;;
  *) echo "ISA must be native, avx2, avx2vnni or avx512nobf16" >&2; exit 2 ;;
esac
mkdir -p "$WORK"
# GCC 12's _tile_loadconfig (amxtileintrin.h) names only the first 8 of ldtilecfg's 64 bytes as its operand, so
# the stores of the tile shapes can be dropped: ggml's AMX q8_0 GEMM (llama.cpp's choice for q8_0 weights on
# CPUs with AMX-INT8) then dies on SIGILL at its first tileloadd (seen with Debian 12's GCC 12.2). Here a copy of
# the header whose operand covers all 64 bytes goes first on ggml's include path, so that ggml runs as a compiler
# without the bug builds it (deepinfer's own TileConfig loads the configuration by inline assembly for this).
AMX_FIX=""
GCC_AMX_H=$(${CC:-gcc} -print-file-name=include 2>/dev/null)/amxtileintrin.h
if [ -f "$GCC_AMX_H" ] && grep -q '(const void \*\*)__config' "$GCC_AMX_H"; then
  mkdir -p "$WORK/amx-header-fix"
  sed 's|(\*((const void \*\*)__config))|(*((const char (*)[64])__config))|' "$GCC_AMX_H" \
    > "$WORK/amx-header-fix/amxtileintrin.h"
  AMX_FIX="-I$WORK/amx-header-fix"
fi
if [ ! -f "$WORK/build/src/libggml-cpu.a" ]; then
  cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release $GGML_ISA -DBUILD_SHARED_LIBS=OFF \
    ${AMX_FIX:+-DCMAKE_C_FLAGS="$AMX_FIX" -DCMAKE_CXX_FLAGS="$AMX_FIX"}
  cmake --build "$WORK/build" --target ggml
fi
g++ -O2 -std=c++17 -I"$SRC/include" "$HERE/ggml_bench.cpp" "$WORK/build/src/libggml.a" \
  "$WORK/build/src/libggml-cpu.a" "$WORK/build/src/libggml-base.a" -fopenmp -lpthread -ldl -o "$WORK/ggml_bench"
# ggml's OpenMP threads wait as libgomp's default has them (spin a while, then sleep), as in a user's llama.cpp:
# OMP_WAIT_POLICY=PASSIVE, which earlier runs set, put every ggml op behind a futex wake-up (w1 at n = 1: 198-205
# against 158-160 us unset, 2026-12-05), and is cleared here.
unset OMP_WAIT_POLICY
exec python3 "$HERE/paired.py" --ggml "$WORK/ggml_bench" --deepinfer "$DEEPINFER" ${DI_ISA:+--isa "$DI_ISA"} \
  --rounds "${ROUNDS:-1}" --rows "$ROWS" --threads "$T" --iters "$I" ${CASES:+--cases "$CASES"} \
  --pages "${PAGES:-4k}"
