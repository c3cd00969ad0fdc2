#!/usr/bin/env bash
# Installs everything deepinfer needs on a bare Debian 12 or 13 machine: Debian packages (apt) and a
# Python virtual environment (.venv) with the test requirements (pip). Idempotent: a second run installs
# nothing. Options:
#   --with-torch   also install torch==2.13.0 (CPU) and Pillow into .venv, for regenerating goldens (tools/goldens).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
with_torch=0
for arg in "$@"; do
  case "$arg" in
    --with-torch) with_torch=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

apt_packages=(
  cmake ninja-build pkg-config g++ make ccache
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libicu-dev libssl-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libopenmpi-dev openmpi-bin
  libsimde-dev  # the tests' emulated AVX-512 build (preset avx512emu)
  xz-utils binutils  # tools/portable_bundle (tar -J, strip), tests/ops/avx2_isa_check.py (objdump)
  python3 python3-venv python3-pip
)

missing=()
for pkg in "${apt_packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python: the venv uses whatever python3 is first on PATH (pyenv's on the build machines, Debian's elsewhere).
venv="$root/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv"
  python3 -m venv "$venv"
fi
requirements="$root/scripts/requirements-test.txt"
stamp="$venv/.deepinfer-requirements"
want="$(sha256sum "$requirements" | cut -d' ' -f1) torch=$with_torch pillow"
if [[ ! -f "$stamp" ]] || ! grep -qxF "$want" "$stamp"; then
  echo "setup: installing Python test requirements into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
  if ((with_torch)); then
    # pillow: the reference's image_processor.py (imported by model.py) imports PIL at module level
    "$venv/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 pillow
  fi
  echo "$want" > "$stamp"
fi
echo "setup: done"
