#!/usr/bin/env bash
# Configures and builds gdrstored, libgdrclient, gdrctl, the tests and bench/ into ./build.
# Extra arguments go to the CMake configure step (e.g. -DGDR_WITH_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build "$BUILD_DIR" -j "$(nproc)"
