#!/usr/bin/env bash
# What CI runs inside the SoftRoCE guest (tests/rxe/run-in-guest.sh): the verbs device as the
# guest sees it, `gdrctl doctor` on it (printed; only a crash fails the run, its FAILs are facts
# of the guest), every ctest test labelled rxe (none may skip: there is a device here), then the
# rc bench for the record. Exit status: ctest's, or 1 when the doctor crashed.
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
for d in rxe0 rxe1; do ibv_devinfo -d "$d" | grep -E "hca_id|state|active_mtu|link_layer"; done
echo "=== gdrctl doctor"
"$BUILD_DIR/client/gdrctl" doctor
doctor_rc=$?
ctest --test-dir "$BUILD_DIR" -L rxe --output-on-failure --timeout 600
rc=$?
if grep -q "\[  SKIPPED \]" "$BUILD_DIR/Testing/Temporary/LastTest.log" 2>/dev/null; then
  echo "guest-ci: rxe tests were skipped inside the guest" >&2
  rc=1
fi
# 0: no FAIL, 1: some check FAILed; anything else is a crash or a usage error.
if ((doctor_rc > 1)); then
  echo "guest-ci: gdrctl doctor exited $doctor_rc" >&2
  rc=1
fi
bash bench/rc_bench.sh || echo "guest-ci: rc_bench failed (not a test failure)" >&2
exit $rc
