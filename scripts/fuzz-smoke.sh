#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz in the sanitized tree (scripts/build-sanitized.sh:
# clang, ASan + UBSan, libFuzzer's coverage hooks; build-asan, shared with the sanitized ctest
# suite) and runs each on its seed corpus (tests/fuzz/corpus/<target>/) for a bounded time. Exits 1 on any
# crash, leak, timeout or out-of-memory, printing the reproducer's path and the command that
# replays it. New inputs the fuzzers find go to build-asan/fuzz-out/<target>/corpus, never into
# the tree. docs/testing.md (Fuzzing) says how to run one longer.
#   FUZZ_SECONDS  seconds per target (default 25)
#   FUZZ_TARGETS  space-separated subset (default: all)
#   FUZZ_JOBS     how many run at once (default: the number of cores)
#   FUZZ_BUILD_DIR  (default build-asan); CC/CXX: clang-14/clang++-14 unless FUZZ_CC/FUZZ_CXX
set -euo pipefail
cd "$(dirname "$0")/.."
B=${FUZZ_BUILD_DIR:-build-asan}
seconds=${FUZZ_SECONDS:-25}
all="tcp_frame_fuzz transfer_op_fuzz volume_spec_fuzz daemon_config_fuzz token_file_fuzz units_fuzz
  address_fuzz etcd_url_fuzz fault_spec_fuzz trace_file_fuzz handoff_message_fuzz"
targets=${FUZZ_TARGETS:-$all}

echo "== fuzz: build the fuzz targets in $B (scripts/build-sanitized.sh) =="
SANITIZE_BUILD_DIR="$B" GDR_BUILD_TARGETS="$targets" bash scripts/build-sanitized.sh "$@"

# Runs one target into $B/fuzz-out/<target>/ and leaves its verdict line in result.
run_one() {
  local t=$1 out="$B/fuzz-out/$1" rc=0 dict=()
  rm -rf "$out"
  mkdir -p "$out/corpus"
  [[ -f tests/fuzz/${t%_fuzz}.dict ]] && dict=(-dict="tests/fuzz/${t%_fuzz}.dict")
  # The first folder takes new inputs; the tree's corpus is only read.
  UBSAN_OPTIONS=print_stacktrace=1 "$B/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 "${dict[@]}" \
    -artifact_prefix="$out/" "$out/corpus" "tests/fuzz/corpus/$t" >"$out/log" 2>&1 || rc=$?
  local runs rate cov repro
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/log")
  cov=$(grep -o 'cov: [0-9]*' "$out/log" | tail -1 | cut -d' ' -f2 || true)
  if ((rc != 0)); then
    repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$out/log" | tail -1)
    echo "FAIL $t: exit $rc, reproducer ${repro:-none} (log $out/log)" >"$out/result"
    echo "  replay: $B/tests/fuzz/$t ${repro:-<input>}" >>"$out/result"
  else
    echo "ok   $t: ${runs:-?} runs, ${rate:-?} exec/s, cov ${cov:-?}" >"$out/result"
  fi
}

# Each fuzzer is one process on one core: as many run at once as there are cores (FUZZ_JOBS),
# which halves the stage on the 2-core CI machine without shortening any target's time.
jobs=${FUZZ_JOBS:-$(nproc)}
running=0
for t in $targets; do
  echo "== fuzz: $t for ${seconds}s =="
  run_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
status=0
summary=()
for t in $targets; do
  out="$B/fuzz-out/$t"
  result=$(cat "$out/result" 2>/dev/null || echo "FAIL $t: no verdict (log $out/log)")
  if [[ $result == FAIL* ]]; then
    status=1
    tail -n 40 "$out/log" 2>/dev/null || true
  fi
  summary+=("$result")
done
echo "== fuzz summary =="
printf '%s\n' "${summary[@]}"
exit "$status"
