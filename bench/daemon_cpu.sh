#!/usr/bin/env bash
# The daemon's CPU time per op while K gdrctl benches run at once against it: the per-op cost
# that ops/s on a small or shared host hides (issue 45). Run it for two gdrstored builds in
# turn, several times, to compare them.
#   bench/daemon_cpu.sh GDRSTORED GDRCTL K OPS [gdrctl bench flags]
#   e.g. bench/daemon_cpu.sh build/daemon/gdrstored build/client/gdrctl 1 60000 --qd 32
# prints one line: clients, daemon CPU us per op, the clients' summed ops/s.
set -euo pipefail
D=$1 G=$2 K=$3 OPS=$4
shift 4
. "$(dirname "$0")/daemon_lib.sh"
bench_daemon "$D" "$bench_work/daemon.log" --log-level=warning
addr=127.0.0.1:$bench_port
"$G" --daemon "$addr" bench -n 500 -q --json "$@" >/dev/null  # warm-up: pages, gRPC threads
# The process's user + system ticks: every thread's, also of link threads that have exited.
ticks() { awk '{print $14 + $15}' /proc/"$bench_pid"/stat; }
t0=$(ticks)
pids=()
for k in $(seq "$K"); do
  "$G" --daemon "$addr" bench -n "$OPS" -q --json "$@" >"$bench_work/out.$k" &
  pids+=($!)
done
wait "${pids[@]}"
t1=$(ticks)
python3 - "$bench_work" "$K" "$OPS" "$t0" "$t1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
work, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0, t1, tck = map(float, sys.argv[4:])
ops = k * n
rate = sum(json.load(open(f"{work}/out.{i}"))["ops_per_sec"] for i in range(1, k + 1))
print(f"{k} client(s): {(t1 - t0) / tck / ops * 1e6:.2f} us daemon CPU/op, "
      f"{rate:.0f} ops/s summed")
PY
