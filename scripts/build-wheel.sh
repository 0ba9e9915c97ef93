#!/usr/bin/env bash
# Makes the gdrstore wheel from a build tree: the Python package with libgdrclient.so.1 and the
# libraries it loads carried inside (scripts/build_wheel.py says how), which
# `pip install --no-deps gdrstore-*.whl` installs offline into any Python >= 3.9 (docs/python.md,
# "Install"). Prints the wheel's path. Needs patchelf and binutils (scripts/install-deps.sh).
# usage: scripts/build-wheel.sh [BUILD_DIR] [OUT_DIR]     (default build/ and BUILD_DIR/wheel)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$SRC/build}" && pwd)
OUT=${2:-$B/wheel}
# Debian's python3 (3.11: tomllib); the wheel it makes serves every Python >= 3.9.
exec /usr/bin/python3 "$SRC/scripts/build_wheel.py" --library "$B/client/libgdrclient.so.1" \
  --python "$SRC/python" --out "$OUT"
