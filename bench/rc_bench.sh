#!/usr/bin/env bash
# rc transport vs perftest on the same verbs device, one run: 1 MiB RDMA WRITEs and READs.
# gdrctl bench drives a real gdrstored (--transport rc: the daemon posts the RDMA ops) and
# perftest's ib_write_bw / ib_read_bw run one QP between two processes on the same port. Prints
# both figures and their ratio. Run inside the SoftRoCE guest:
#   tests/rxe/run-in-guest.sh bash bench/rc_bench.sh
# Env: BUILD_DIR (build), GDR_RC_BENCH_ITERS (300 ops per run), GDR_RC_BENCH_QD (16),
#      GDR_RC_BENCH_POLL ("busy adaptive": daemon poll modes to measure),
#      GDR_RC_BENCH_RAILS_ITERS (64 ops of 8 MiB per rails run).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
N=${GDR_RC_BENCH_ITERS:-300}
QD=${GDR_RC_BENCH_QD:-16}
POLL_MODES=${GDR_RC_BENCH_POLL:-busy adaptive}
SIZE=1048576

dev=$(ls /sys/class/infiniband 2>/dev/null | head -n1)
[[ -n $dev ]] || { echo "rc_bench: no verbs device" >&2; exit 2; }
# The RoCE v2 IPv4-mapped GID: its index and address (as the daemon picks it).
gid_index="" ip=""
for f in /sys/class/infiniband/$dev/ports/1/gids/*; do
  i=${f##*/}
  g=$(cat "$f" 2>/dev/null || true)
  t=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$i" 2>/dev/null || true)
  if [[ $t == "RoCE v2" && $g == 0000:0000:0000:0000:0000:ffff:* ]]; then
    h=${g:30:4}${g:35:4}
    ip=$((16#${h:0:2})).$((16#${h:2:2})).$((16#${h:4:2})).$((16#${h:6:2}))
    gid_index=$i
    break
  fi
done
[[ -n $gid_index ]] || { echo "rc_bench: $dev has no RoCE v2 IPv4 GID" >&2; exit 2; }
work=$(mktemp -d)
daemon_pid="" server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  [[ -n $daemon_pid ]] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" || true
  rm -rf "$work"
}
trap cleanup EXIT

# perftest: bytes/s from the BW average column (--report_gbits: 1e9 bit/s).
perftest() {
  local tool=$1 port=$2
  "$tool" -d "$dev" -x "$gid_index" -s "$SIZE" -n "$N" -F --report_gbits -p "$port" \
    > "$work/$tool.server" 2>&1 &
  server_pid=$!
  for _ in $(seq 300); do   # until the server's TCP handshake port is listening
    ss -ltn 2>/dev/null | grep -q ":$port " && break
    sleep 0.1
  done
  "$tool" -d "$dev" -x "$gid_index" -s "$SIZE" -n "$N" -F --report_gbits -p "$port" "$ip" \
    > "$work/$tool.client" 2>&1
  wait "$server_pid" || true
  server_pid=""
  awk -v s="$SIZE" '$1 == s {printf "%.0f\n", $4 * 125000000; exit}' "$work/$tool.client"
}

start_daemon() {
  rm -f "$work/port"
  "$BUILD_DIR/daemon/gdrstored" --listen 127.0.0.1:0 --port-file "$work/port" "$@" \
    --volume vol0=512MiB 2> "$work/gdrstored.log" &
  daemon_pid=$!
  for _ in $(seq 600); do
    [[ -s $work/port ]] && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/gdrstored.log"; exit 1; }
    sleep 0.1
  done
  port=$(cat "$work/port")
}

stop_daemon() { kill -TERM "$daemon_pid"; wait "$daemon_pid" || true; daemon_pid=""; }

gdrctl_bench() {
  local type=$1 port=$2
  "$BUILD_DIR/client/gdrctl" -p "$port" --transport rc --rdma-device "$dev" --json bench \
    -t "$type" -s 1MiB -n "$N" --qd "$QD" -q |
    sed -n 's/.*"gbps":\([0-9.]*\).*/\1/p' | awk '{printf "%.0f\n", $1 * 1e9}'
}

div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }

echo "rc_bench: $dev GID[$gid_index] $ip, 1 MiB x $N, gdrctl qd $QD, $(nproc) CPUs"
pw=$(perftest ib_write_bw 18515)
pr=$(perftest ib_read_bw 18516)
printf "  %-34s %10.1f MB/s\n" "ib_write_bw (1 QP)" "$(div "$pw" 1e6)"
printf "  %-34s %10.1f MB/s\n" "ib_read_bw (1 QP)" "$(div "$pr" 1e6)"
for mode in $POLL_MODES; do
  start_daemon --rdma-device "$dev" --rdma-poll-mode "$mode"
  gw=$(gdrctl_bench write "$port")
  gr=$(gdrctl_bench read "$port")
  stop_daemon
  printf "  %-34s %10.1f MB/s   ratio %.2f vs ib_write_bw\n" "gdrctl bench write, poller $mode" \
    "$(div "$gw" 1e6)" "$(div "$gw" "$pw")"
  printf "  %-34s %10.1f MB/s   ratio %.2f vs ib_read_bw\n" "gdrctl bench read, poller $mode" \
    "$(div "$gr" 1e6)" "$(div "$gr" "$pr")"
done

# Rails: the same daemon (both devices) and gdrctl over one rail, then both.
[[ -d /sys/class/infiniband/rxe0 && -d /sys/class/infiniband/rxe1 ]] || exit 0
RN=${GDR_RC_BENCH_RAILS_ITERS:-64}
rails_bench() {
  local type=$1 rails=$2
  "$BUILD_DIR/client/gdrctl" -p "$port" --transport rc --rails "$rails" --json bench \
    -t "$type" -s 8MiB -n "$RN" --qd 4 -q > "$work/rails.json"
  sed -n 's/.*"gbps":\([0-9.]*\).*/\1/p' "$work/rails.json" | awk '{printf "%.0f\n", $1 * 1e9}'
}
# "rxe0 51.2%, rxe1 48.8%" from the bench's rails array.
rail_shares() {
  grep -o '"device":"[^"]*","daemon_rail":"[^"]*","speed_mbps":[0-9]*,"ops":[0-9]*,"bytes":[0-9]*' \
    "$work/rails.json" |
    sed 's/"device":"\([^"]*\)".*"bytes":\([0-9]*\)/\1 \2/' |
    awk '{d[NR]=$1; b[NR]=$2; t+=$2} END {for (i=1;i<=NR;i++) printf "%s%s %.1f%%", (i>1?", ":""), d[i], 100*b[i]/t}'
}
echo "rails: gdrstored --rdma-device rxe0,rxe1; gdrctl 8 MiB x $RN, qd 4, slices of 1 MiB"
start_daemon --rdma-device rxe0,rxe1
for type in write read; do
  one=$(rails_bench "$type" rxe0)
  two=$(rails_bench "$type" rxe0,rxe1)
  printf "  %-5s one rail %8.1f MB/s   two rails %8.1f MB/s (%s)   ratio %.2f\n" "$type" \
    "$(div "$one" 1e6)" "$(div "$two" 1e6)" "$(rail_shares)" "$(div "$two" "$one")"
done
stop_daemon
