#!/usr/bin/env bash
# `gdrctl bench` against a memory volume of each media preset (and one without a model), gets
# and puts of 4 KiB at queue depth 1 and 32 and of 1 MiB at queue depth 8, one daemon and one
# client on loopback (tcp). Prints a markdown table (docs/benchmarks.md, "Media presets"):
#   bash bench/media_presets.sh            (from the repository, after scripts/build.sh)
# Env: BIN (build dir holding daemon/gdrstored and client/gdrctl, or a flat dir of both),
#      GDR_MEDIA_BENCH_SCALE (1: multiplies every op count; each run takes 1-3 s at 1).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build}
SCALE=${GDR_MEDIA_BENCH_SCALE:-1}
find_bin() { for p in "$BIN/$1" "$BIN/$2"; do [[ -x $p ]] && { echo "$p"; return; }; done
             echo "media_presets: no $2 under $BIN" >&2; exit 2; }
GDRSTORED=$(find_bin daemon/gdrstored gdrstored)
GDRCTL=$(find_bin client/gdrctl gdrctl)

source "$(dirname "$0")/daemon_lib.sh"

presets=(none nvme-gen4 nvme-gen5 sata-ssd hdd object-store)
args=()
for p in "${presets[@]}"; do
  if [[ $p == none ]]; then args+=(--volume "none=256MiB")
  else args+=(--volume "$p=256MiB,media=$p"); fi
done
bench_daemon "$GDRSTORED" "$bench_work/daemon.log" "${args[@]}"
port=$bench_port

# Op counts per preset and run (4 KiB qd1, 4 KiB qd32, 1 MiB qd8): about 1-3 s each here.
declare -A counts=(
  [none]="5000 40000 2000" [nvme-gen4]="5000 40000 2000" [nvme-gen5]="5000 40000 2000"
  [sata-ssd]="4000 40000 1000" [hdd]="150 150 100" [object-store]="50 2000 200")

echo "| volume | op | size | qd | ops | MB/s | ops/s | p50 us | p99 us |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in "${presets[@]}"; do
  read -r n1 n32 nbig <<<"${counts[$p]}"
  for run in "4KiB 1 $n1" "4KiB 32 $n32" "1MiB 8 $nbig"; do
    read -r size qd n <<<"$run"
    n=$((n * SCALE))
    for type in write read; do
      json=$("$GDRCTL" --daemon "127.0.0.1:$port" bench --json -q --volume "$p" -s "$size" \
               --qd "$qd" -n "$n" -t "$type")
      python3 - "$p" "$type" "$size" "$json" <<'EOF'
import json, sys
p, t, size, j = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
op = "get" if t == "write" else "put"
print(f"| {p} | {op} | {size} | {j['qd']} | {j['ops']} | {j['gbps'] * 1000:.1f} | "
      f"{j['ops_per_sec']:.0f} | {j['lat_us']['p50']:.0f} | {j['lat_us']['p99']:.0f} |")
EOF
    done
  done
done
