#!/usr/bin/env bash
# Configures and builds the one sanitized tree (default build-asan): clang-14 with ASan + LSan +
# UBSan on every target (any report aborts the process) and libFuzzer's coverage hooks, so the
# same objects serve the host ctest suite (scripts/sanitize-tests.sh) and the fuzz targets
# (scripts/fuzz-smoke.sh). One tree instead of two saves a whole build of the project in CI.
#   SANITIZE_BUILD_DIR  the tree (default build-asan)
#   GDR_BUILD_TARGETS   space-separated targets to build (default: all)
#   FUZZ_CC / FUZZ_CXX  compilers (default clang-14 / clang++-14)
# Extra arguments go to cmake's configure step (e.g. -DGDR_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SANITIZE_BUILD_DIR:-build-asan}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# What this tree is for sets its flags (docs/testing.md, "CI's time"): -O1 is what the sanitizers'
# own documentation builds with, and line tables are all a report's stack needs, where -O2 -g
# cost a third more compile time; lld links the ~200 instrumented test programs 4x faster than
# ld.bfd. The test programs themselves are built at -O0 without coverage hooks
# (tests/CMakeLists.txt).
opt="-O1 -gline-tables-only -DNDEBUG"
lld=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
  -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="${FUZZ_CC:-clang-14}" -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-14}" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" "${lld[@]}" \
  -DGDR_SANITIZE=address,undefined -DGDR_FUZZ=ON -DGDR_TEST_LABELS= "${launcher[@]}" "$@" \
  >/dev/null
targets=()
for t in ${GDR_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$B" -j "$(nproc)" "${targets[@]}"
