#!/usr/bin/env bash
# What CI runs inside the SoftRoCE guest (tests/rxe/run-in-guest.sh): the verbs device as the
# guest sees it, every ctest test labelled rxe (none may skip: there is a device here), then the
# rc bench for the record. Exit status: ctest's.
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
ibv_devinfo -d rxe0 | grep -E "hca_id|state|active_mtu|link_layer"
ctest --test-dir "$BUILD_DIR" -L rxe --output-on-failure --timeout 600
rc=$?
if grep -q "\[  SKIPPED \]" "$BUILD_DIR/Testing/Temporary/LastTest.log" 2>/dev/null; then
  echo "guest-ci: rxe tests were skipped inside the guest" >&2
  rc=1
fi
bash bench/rc_bench.sh || echo "guest-ci: rc_bench failed (not a test failure)" >&2
exit $rc
