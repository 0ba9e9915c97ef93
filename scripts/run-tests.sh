#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test, each once, in two builds of the tree:
#  - build/ (gcc, warnings as errors): the tests the sanitized tree leaves out (labels deploy and
#    timing), the Python package's pytest suite, and the verbs tests (label rxe) inside a QEMU
#    guest with SoftRoCE, where they run for real (they skip here without an RDMA device);
#  - build-asan/ (clang, ASan+UBSan, warnings as errors; scripts/build-sanitized.sh): the host
#    ctest suite (scripts/sanitize-tests.sh) and the fuzz smoke run, which share its objects.
# GDR_SKIP_RXE=1 leaves the guest out; GDR_SKIP_SANITIZE=1 the sanitized tree (and so the host
# suite and the fuzzers). docs/testing.md says why the suites are split this way.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DGDR_WERROR=ON
status=0
echo "== plain tree: packaging (label deploy) and timing tests (label timing) =="
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 600 -L 'deploy|timing' ||
  status=$?
# The Python package against the shared library just built (Debian's python3 has its numpy and
# pytest; a python3 earlier on the PATH may not).
echo "== Python package: /usr/bin/python3 -m pytest tests/python =="
B=$(cd "${BUILD_DIR:-build}" && pwd)
GDRSTORE_LIBRARY="$B/client/libgdrclient.so.1" GDRSTORED_BIN="$B/daemon/gdrstored" \
  /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests/python || status=$?
if [[ ${GDR_SKIP_SANITIZE:-0} != 1 ]]; then
  echo "== sanitizers: scripts/sanitize-tests.sh (clang ASan+UBSan, build-asan): the host suite =="
  bash scripts/sanitize-tests.sh -DGDR_WERROR=ON || status=$?
  # The libFuzzer targets, built in the same tree, 25 s each on their corpora.
  echo "== fuzz smoke: scripts/fuzz-smoke.sh (build-asan) =="
  bash scripts/fuzz-smoke.sh -DGDR_WERROR=ON || status=$?
fi
if [[ ${GDR_SKIP_RXE:-0} != 1 ]]; then
  echo "== verbs tests inside the SoftRoCE guest: tests/rxe/run-in-guest.sh tests/rxe/guest-ci.sh =="
  tests/rxe/run-in-guest.sh bash tests/rxe/guest-ci.sh || status=$?
fi
exit "$status"
