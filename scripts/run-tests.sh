#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test, each once, in two builds of the tree:
#  - build/ (gcc, warnings as errors; only the test suites it runs): the tests the sanitized tree
#    leaves out (labels deploy and timing), the Python package's pytest suite, and the verbs
#    tests (label rxe) inside a QEMU guest with SoftRoCE, where they run for real (they skip here
#    without an RDMA device);
#  - build-asan/ (clang, ASan+UBSan, warnings as errors; scripts/build-sanitized.sh): the host
#    ctest suite (scripts/sanitize-tests.sh) and the fuzz smoke run, which share its objects.
# GDR_SKIP_RXE=1 leaves the guest out; GDR_SKIP_SANITIZE=1 the sanitized tree (and so the host
# suite and the fuzzers). docs/testing.md says why the suites are split this way.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The plain tree builds only the suites it runs (labels rxe, deploy, timing): the sanitized tree
# builds and runs every other one. Without the sanitized tree it builds them all, for ctest by hand.
plain_labels="rxe;deploy;timing"
if [[ ${GDR_SKIP_SANITIZE:-0} == 1 ]]; then plain_labels=""; fi
# A Release tree at RelWithDebInfo's -O2: nothing here reads debug info (reports come from the
# sanitized tree), and -g was a third of this tree's compile time.
GDR_TEST_LABELS=$plain_labels bash scripts/build.sh -DGDR_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"
status=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
names=()
# Runs one stage with its output also kept, so that the end of the run (what a CI log's tail
# shows) can name every stage's result and repeat its summary and failure lines.
stage() {
  local name=$1 rc t0=$SECONDS
  shift
  echo "== $name: $* =="
  set +e
  "$@" 2>&1 | tee "$logs/${#names[@]}"
  rc=${PIPESTATUS[0]}
  set -e
  names+=("$name|$rc|$((SECONDS - t0))")
  ((rc == 0)) || status=$rc
}
B=$(cd "${BUILD_DIR:-build}" && pwd)
stage "plain tree: packaging (label deploy) and timing tests (label timing)" \
  ctest --test-dir "$B" --output-on-failure --timeout 600 -L 'deploy|timing'
# The Python package against the shared library just built (Debian's python3 has its numpy and
# pytest; a python3 earlier on the PATH may not).
# The tests marked serial (a measured rate against a model) run alone, then the rest on three
# workers (pytest-xdist: most of them wait on daemons and child processes, not the CPU).
pytests() {
  local py=(env GDRSTORE_LIBRARY="$B/client/libgdrclient.so.1" GDRSTORED_BIN="$B/daemon/gdrstored"
            /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider)
  if /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
    local rc=0
    "${py[@]}" -m serial tests/python || rc=$?
    "${py[@]}" -m 'not serial' -n 3 tests/python || rc=$?
    return "$rc"
  else
    "${py[@]}" tests/python
  fi
}
stage "Python package (pytest)" pytests
if [[ ${GDR_SKIP_SANITIZE:-0} != 1 ]]; then
  stage "sanitizers: the host suite (clang ASan+UBSan, build-asan)" \
    bash scripts/sanitize-tests.sh -DGDR_WERROR=ON
  # The libFuzzer targets, built in the same tree, 25 s each on their corpora.
  stage "fuzz smoke (build-asan)" bash scripts/fuzz-smoke.sh -DGDR_WERROR=ON
fi
if [[ ${GDR_SKIP_RXE:-0} != 1 ]]; then
  stage "verbs tests inside the SoftRoCE guest" \
    tests/rxe/run-in-guest.sh bash tests/rxe/guest-ci.sh
fi
echo
echo "== every stage =="
for i in "${!names[@]}"; do
  IFS='|' read -r name rc secs <<<"${names[$i]}"
  if ((rc == 0)); then verdict=passed; else verdict="FAILED (exit $rc)"; fi
  echo "-- $name: $verdict after ${secs}s"
  grep -aE 'tests passed|tests failed|Failed|FAILED|passed|failed|error:|ERROR|SUMMARY:' \
    "$logs/$i" | grep -v '   Passed ' | tail -n 12 | sed 's/^/   /' || true
done
exit "$status"
