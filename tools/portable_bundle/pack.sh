#!/bin/bash
# A relocatable bundle of the CLI and the kernel / model test binaries, to measure and test this build on another
# x86-64 Linux machine that has none of the build's dependencies (a rented server, a GPU host's CPU side): a
# release build with MPI off and libstdc++ / libgcc linked in, the shared libraries it loads (fmt, ICU,
# OpenSSL, PCRE2, cpp-httplib, zlib, brotli) beside it, the ctest files for `-L "ops|model"`, all in one
# .tar.xz. glibc stays the target's own (built against Debian 12's 2.36: runs on 2.36 and newer).
#   tools/portable_bundle/pack.sh [OUT_TARBALL]      (default build/portable.tar.xz)
# On the target, from a checkout of the same commit: tools/portable_bundle/run.sh BUNDLE [STAGE...].
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build/portable.tar.xz}
BUILD=$ROOT/build/portable
"$ROOT/scripts/setup.sh"  # (idempotent: the build's packages, xz and strip on a bare machine)
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_WITH_MPI=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" > /dev/null
cmake --build "$BUILD" -j"$(nproc)"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
# the test binaries that `ctest -L "ops|model"` runs, the CLI and the golden probe; every CTestTestfile / gtest
# include file (they name the binaries by their absolute build paths: run.sh links that path on the target)
(cd "$ROOT/build" && {
  find portable -name "*.cmake" ! -path "*/CMakeFiles/*"
  ctest --test-dir portable -N -V -L "ops|model" | sed -n 's|.*Test command: \([^ ]*/build/portable/[^ ]*\).*|\1|p' |
    sed "s|^$ROOT/build/||" | sort -u
  echo portable/tools/deepinfer
  echo portable/tests/golden_probe
} | sort -u | tar cf - -T - | tar xf - -C "$STAGE")
find "$STAGE" -type f -perm -u+x -exec strip --strip-unneeded {} \;
# libstdc++ / libgcc_s (which the libraries load) go aside: the target's own are used unless they are older than
# the build's (run.sh then adds lib/fallback), so that python3 and numpy under the golden scripts keep theirs
mkdir -p "$STAGE/portable/lib/fallback"
ldd "$BUILD/tools/deepinfer" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | while read -r lib; do
    case $(basename "$lib") in
      libstdc++.so*|libgcc_s.so*) cp -L "$lib" "$STAGE/portable/lib/fallback/" ;;
      *) cp -L "$lib" "$STAGE/portable/lib/" ;;
    esac
  done
echo "$ROOT" > "$STAGE/portable/BUILD_ROOT"
tar cJf "$OUT" -C "$STAGE" portable
echo "wrote $OUT ($(du -h "$OUT" | cut -f1))"
