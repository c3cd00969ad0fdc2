#!/bin/bash
# Runs a bundle from pack.sh on this machine, from a checkout of the same commit, logging into $OUT (default
# /tmp/portable-out): the machine (lscpu, ISA flags, memory), then each STAGE in order (default: bench decode tests)
#   bench   bench-ops streamed on all threads, n = 1 4 16 64 256 (GEMVs against the read bandwidth, GEMMs against
#           the peak: the AMX tile peak where the CPU has tiles)
#   decode  make-tiny --preset release (released dims, 2 layers), bench-decode at batch 1 and 16
#   tests   ctest -L "ops|model" (kernel tables against the reference, row invariance, goldens, engine
#           invariants) on this CPU's tables; the golden scripts need python3 with numpy
#   incache bench-ops --in-cache (one core's ceilings, thread CPU time)
#   threads bench-ops --thread-profile of the prefill GEMMs (n = 64 256) on all threads and on half of them: where
#           each call's thread time goes (parallel work, shared activation preparation, balance, hand-off)
#   tools/portable_bundle/run.sh BUNDLE [STAGE...]
set -uo pipefail
BUNDLE=${1:?usage: run.sh BUNDLE [STAGE...]}
shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/portable-out}
mkdir -p "$OUT" "$ROOT/build"
exec > >(tee -a "$OUT/run.log") 2>&1
t0=$(date +%s)
stamp() { echo "=== [$(($(date +%s) - t0)) s] $*"; }

stamp machine
uname -srm; nproc; lscpu | grep -E "Model name|Vendor|family|Model:|Thread|Core|Socket|L2|L3|NUMA node\("
grep -o -w -E "avx512[a-z_0-9]*|amx[a-z_0-9]*|avx_vnni|avx2|fma" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
grep -E "MemTotal|MemAvailable" /proc/meminfo

stamp unpack
tar xJf "$BUNDLE" -C "$ROOT/build" || exit 1
BUILT_AT=$(cat "$ROOT/build/portable/BUILD_ROOT")
# ctest's files and the tests name the build machine's paths: make them lead here
if [ "$BUILT_AT" != "$ROOT" ]; then
  if [ -e "$BUILT_AT" ]; then echo "$BUILT_AT exists here and is not this checkout" >&2; exit 1; fi
  mkdir -p "$(dirname "$BUILT_AT")" && ln -s "$ROOT" "$BUILT_AT"
fi
if [ ! -x "$ROOT/.venv/bin/python" ] && command -v python3 > /dev/null; then  # (the golden scripts' interpreter)
  mkdir -p "$ROOT/.venv/bin"
  printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > "$ROOT/.venv/bin/python"
  chmod +x "$ROOT/.venv/bin/python"
fi
export LD_LIBRARY_PATH=$ROOT/build/portable/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
D=$ROOT/build/portable/tools/deepinfer
if ! "$D" version > /dev/null 2>&1; then  # this machine's libstdc++ older than the build's
  export LD_LIBRARY_PATH=$ROOT/build/portable/lib/fallback:$LD_LIBRARY_PATH
fi
"$D" version || exit 1

for stage in ${@:-bench decode tests}; do
  case $stage in
    bench)
      stamp bench-ops
      "$D" bench-ops --rows 1 4 16 64 256 --iters 3 --json "$OUT/bench_ops.json" > "$OUT/bench_ops.log" 2>&1
      grep -v "^\[" "$OUT/bench_ops.log" ;;
    decode)
      stamp make-tiny
      "$D" make-tiny --preset release --out "$OUT/rel2" 2>&1 | tail -1
      for batch in 1 16; do
        stamp "bench-decode batch $batch"
        "$D" bench-decode --model "$OUT/rel2" --context 512 --batch $batch --steps 8 --rounds 3 --op-profile \
          --thread-profile > "$OUT/decode_b$batch.log" 2>&1
        grep -E "^bench-decode: round|^decode step|^layers:|^linears|^thread pool" "$OUT/decode_b$batch.log"
      done
      rm -rf "$OUT/rel2" ;;
    tests)
      stamp tests
      ctest --test-dir "$ROOT/build/portable" -j"$(nproc)" -L "ops|model" -E mpi --output-on-failure \
        > "$OUT/tests.log" 2>&1
      echo "ctest exit $?"; grep -E "tests passed|\*\*\*" "$OUT/tests.log" ;;
    incache)
      stamp bench-ops --in-cache
      "$D" bench-ops --in-cache --rows 1 16 64 256 > "$OUT/incache.log" 2>&1
      grep -v "^\[" "$OUT/incache.log" ;;
    threads)
      for t in $(nproc) $(( $(nproc) / 2 )); do
        stamp "bench-ops --thread-profile, $t threads"
        "$D" bench-ops --threads "$t" --rows 64 256 --iters 3 --only gemm_ --thread-profile \
          --json "$OUT/threads_$t.json" > "$OUT/threads_$t.log" 2>&1
        grep -v "^\[" "$OUT/threads_$t.log"
      done ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
stamp done
