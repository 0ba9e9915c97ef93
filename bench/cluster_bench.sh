#!/usr/bin/env bash
# Aggregate get bandwidth of one client over a cluster volume of 1, 2, 3 members (each a real
# gdrstored registered in a real etcd, all on loopback), the ratio of each to one member, and
# the time from SIGKILL of a member to its leaving the view (lease expiry). Run on a host with
# cores to spare (the storage side and the client share them):
#   bash bench/cluster_bench.sh            (from the repository, after scripts/build.sh)
# Env: BIN (build dir holding daemon/gdrstored and client/gdrctl, or a flat dir of both),
#      ETCD (/usr/bin/etcd), GDR_CLUSTER_BENCH_SIZE (64MiB per op), _ITERS (192), _QD (8),
#      _VOLUME (1GiB per member), _TTL (3 s lease for the kill timing), _REPEATS (3 runs per
#      size; the median is reported).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build}
ETCD=${ETCD:-/usr/bin/etcd}
SIZE=${GDR_CLUSTER_BENCH_SIZE:-64MiB}
ITERS=${GDR_CLUSTER_BENCH_ITERS:-192}
QD=${GDR_CLUSTER_BENCH_QD:-8}
VOL=${GDR_CLUSTER_BENCH_VOLUME:-1GiB}
TTL=${GDR_CLUSTER_BENCH_TTL:-3}
REPEATS=${GDR_CLUSTER_BENCH_REPEATS:-3}
find_bin() { for p in "$BIN/$1" "$BIN/$2"; do [[ -x $p ]] && { echo "$p"; return; }; done
             echo "cluster_bench: no $2 under $BIN" >&2; exit 2; }
GDRSTORED=$(find_bin daemon/gdrstored gdrstored)
GDRCTL=$(find_bin client/gdrctl gdrctl)
[[ -x $ETCD ]] || { echo "cluster_bench: no etcd at $ETCD (Debian: etcd-server)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cport=$(free_port); pport=$(free_port)
"$ETCD" --name bench --data-dir "$work/etcd" \
  --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
  --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
  --initial-cluster "bench=http://127.0.0.1:$pport" > "$work/etcd.log" 2>&1 &
pids+=($!)

# start_member ID PREFIX: a daemon registered under etcd://.../PREFIX; prints its PID.
start_member() {
  local id=$1 prefix=$2
  "$GDRSTORED" --listen 127.0.0.1:0 --port-file "$work/$prefix-$id.port" --log-level warning \
    --volume "vol0=$VOL" --cluster "etcd://127.0.0.1:$cport/$prefix" --cluster-id "$id" \
    --cluster-ttl "$TTL" > "$work/$prefix-$id.log" 2>&1 &
  echo $!
}
# wait_members PREFIX N: until `cluster status` shows N present and healthy (30 s at most).
wait_members() {
  for _ in $(seq 300); do
    "$GDRCTL" --cluster "etcd://127.0.0.1:$cport/$1" cluster status 2>/dev/null \
      | grep -q "$2 present and healthy" && return 0
    sleep 0.1
  done
  echo "cluster_bench: $2 members never came up under $1" >&2; exit 1
}

declare -A gbps
for n in 1 2 3; do
  prefix="bench$n"
  for i in $(seq 0 $((n - 1))); do pids+=("$(start_member "m$i" "$prefix")"); done
  wait_members "$prefix" "$n"
  url="etcd://127.0.0.1:$cport/$prefix"
  "$GDRCTL" --cluster "$url" cluster create-volume vol0 > /dev/null
  # A put first, so the gets read what a client wrote (and every member's pages are touched).
  "$GDRCTL" --cluster "$url" bench -t read -s "$SIZE" -n "$((n * 4))" --qd "$QD" > /dev/null
  runs=()
  for _ in $(seq "$REPEATS"); do
    out=$("$GDRCTL" --cluster "$url" bench -t write -s "$SIZE" -n "$ITERS" --qd "$QD")
    runs+=("$(sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p' <<< "$out" | head -n1)")
    echo "$n member(s): $out"
  done
  gbps[$n]=$(printf '%s\n' "${runs[@]}" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  # The members of this size stop before the next size starts: same cores for each.
  for p in "${pids[@]:1}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=("${pids[0]}")
done
echo
echo "cluster get, one client, $SIZE ops x $ITERS, qd $QD, tcp on loopback ($(nproc) cores)," \
     "median of $REPEATS runs:"
for n in 1 2 3; do
  awk -v n="$n" -v g="${gbps[$n]}" -v b="${gbps[1]}" \
    'BEGIN { printf "  %d member(s)  %8.3f GB/s   ratio to 1 member %.2f\n", n, g, g / b }'
done

# Time from SIGKILL to the member's entry leaving etcd (its lease expires).
prefix=kill
for i in 0 1; do pids+=("$(start_member "m$i" "$prefix")"); done
wait_members "$prefix" 2
victim=${pids[-1]}
t0=$(date +%s.%N)
kill -KILL "$victim"
for _ in $(seq 600); do
  "$GDRCTL" --cluster "etcd://127.0.0.1:$cport/$prefix" cluster status 2>/dev/null \
    | grep -q "1 present and healthy" && break
  sleep 0.05
done
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v ttl="$TTL" \
  'BEGIN { printf "SIGKILL to leaving the view: %.2f s (lease ttl %d s)\n", b - a, ttl }'
