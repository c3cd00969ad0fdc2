#!/usr/bin/env bash
# One command from a fresh clone: install dependencies, build, run the whole default test suite.
# Heavier suites carry the label "heavy" and run only when asked (ctest -L heavy).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "${DEEPINFER_PRESET:-ci}"
cd "$root"
ctest --preset "${DEEPINFER_PRESET:-ci}" -j "$(nproc)" -LE heavy --timeout 1200
