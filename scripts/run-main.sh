#!/usr/bin/env bash
# One command from a fresh clone: install dependencies, build, and generate a continuation with the
# built-in tiny checkpoint (generated on first use into the cache directory).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" release
exec "$root/build/release/tools/deepinfer" generate --prompt "${1:-The quick brown fox}" --max-tokens 32 --temperature 0
