#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test: install packages, build, run ctest (unit + integration)
# here, the Python package's pytest suite, the host ctest suite again under ASan+UBSan
# (scripts/sanitize-tests.sh), then the verbs tests (label rxe) inside a QEMU guest with
# SoftRoCE, where they run for real (they skip here when this machine has no RDMA device).
# GDR_SKIP_RXE=1 leaves the guest out; GDR_SKIP_SANITIZE=1 the sanitized suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
status=0
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 600 || status=$?
# The libFuzzer targets (tests/fuzz), built with clang in build-fuzz, 25 s each on their corpora.
echo "== fuzz smoke: scripts/fuzz-smoke.sh =="
bash scripts/fuzz-smoke.sh || status=$?
# The Python package against the shared library just built (Debian's python3 has its numpy and
# pytest; a python3 earlier on the PATH may not).
echo "== Python package: /usr/bin/python3 -m pytest tests/python =="
B=$(cd "${BUILD_DIR:-build}" && pwd)
GDRSTORE_LIBRARY="$B/client/libgdrclient.so.1" GDRSTORED_BIN="$B/daemon/gdrstored" \
  /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests/python || status=$?
# The host ctest suite again, built with ASan+UBSan into build-asan (GDR_SKIP_SANITIZE=1: not).
if [[ ${GDR_SKIP_SANITIZE:-0} != 1 ]]; then
  echo "== sanitizers: scripts/sanitize-tests.sh (ASan+UBSan, build-asan) =="
  bash scripts/sanitize-tests.sh || status=$?
fi
if [[ ${GDR_SKIP_RXE:-0} != 1 ]]; then
  echo "== verbs tests inside the SoftRoCE guest: tests/rxe/run-in-guest.sh tests/rxe/guest-ci.sh =="
  tests/rxe/run-in-guest.sh bash tests/rxe/guest-ci.sh || status=$?
fi
exit "$status"
