#!/usr/bin/env bash
# Configures and builds gdrstored, libgdrclient, gdrctl, the tests and bench/ into ./build.
# Extra arguments go to the CMake configure step (e.g. -DGDR_WITH_CUDA=OFF). GDR_BUILD_TARGETS
# (space-separated) builds only those targets and what they need; unset builds everything.
# GDR_TEST_LABELS (a ;-list of ctest labels) builds only the test suites with one of them
# (tests/CMakeLists.txt); unset builds every suite, even in a tree configured with it before.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# ccache, where installed, lets several checkouts of the tree share compiled objects.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DGDR_TEST_LABELS="${GDR_TEST_LABELS:-}" "$@"
targets=()
for t in ${GDR_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
