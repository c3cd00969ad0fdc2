#!/usr/bin/env bash
# One command from a fresh clone: install dependencies, build, run the whole default test suite.
# Heavier suites carry the label "heavy" and run only when asked (ctest -L heavy).
# On a CPU without the AVX-512 kernel table's instructions, the AVX-512 kernels are then built once more against
# SIMDe's emulation (preset avx512emu, src/backend/cpu/x86/avx512/emulated_avx512.h; AMX tiles emulated too) and
# the op and model tests run on them; on an AVX-512 CPU without AMX, the AMX kernels on emulated tiles (preset
# amxemu, emulated_amx.h). So every CI machine checks every kernel table against the scalar reference and the goldens.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "${DEEPINFER_PRESET:-ci}"
cd "$root"
ctest --preset "${DEEPINFER_PRESET:-ci}" -j "$(nproc)" -LE heavy --timeout 1200

native_avx512=1
for flag in avx512f avx512bw avx512vl avx512dq avx512_bf16 avx512vbmi avx512_vnni; do
  grep -qw "$flag" /proc/cpuinfo || native_avx512=0
done
if ((native_avx512 == 0)); then
  echo "run-tests: this CPU lacks the AVX-512 table's instructions; its kernels next, on SIMDe (preset avx512emu)"
  "$root/scripts/build.sh" avx512emu
  # (the MPI tests need the MPI build, which this preset leaves out: they ran above)
  ctest --preset avx512emu -j "$(nproc)" -L "ops|model" -E "mpi" --timeout 1200
elif ! grep -qw amx_bf16 /proc/cpuinfo; then
  echo "run-tests: this CPU has no AMX; the AMX kernels next, on emulated tiles (preset amxemu)"
  "$root/scripts/build.sh" amxemu
  # (the *_amx_off tests ran above, on this CPU's own kernels)
  ctest --preset amxemu -j "$(nproc)" -L "ops|model" -E "mpi|amx_off" --timeout 1200
fi
