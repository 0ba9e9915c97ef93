#!/usr/bin/env bash
# Same-host paths, each against a baseline measured in this run (issue 31's ratios):
#   - local, one client, 64 MiB gets into GPU memory vs a pinned host->GPU copy of 64 MiB
#     (torch), with 4 and 8 copy threads; host memory vs a memcpy of the same size;
#   - through the node agent (upstream tcp) vs a direct tcp client, host and GPU memory;
#   - 8 client processes at once into one GPU: through the agent (upstream local, and tcp),
#     direct over local and over tcp, each summed and set against the pinned copy.
# Each daemon serves one memory volume whose pages it page-locks on the first GPU op (seconds
# for GiBs): a warm-up op pays that before anything is timed.
# Runs the binaries scripts/gpu-carry.sh packed: bash bench/agent_paths.sh [CARRY_DIR]. Without
# a GPU (or torch) the GPU lines say so and the host lines still run.
set -u
C=$(realpath "${1:-.gpu-carry}")
export LD_LIBRARY_PATH=$C/lib
B=$C/bin
W=$(mktemp -d /tmp/agent-paths.XXXXXX)
trap 'kill $APID $ALPID $DPID 2>/dev/null; rm -rf "$W"' EXIT
nproc
GPU=0
nvidia-smi -L 2>/dev/null | head -1 || GPU=
PY=${PYTHON:-python3}

# pinned host->GPU copy of 64 MiB (GB/s), the GPU lines' baseline
pinned=$($PY - <<'EOF' 2>/dev/null
import torch, time
n = 64 << 20
h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
d = torch.empty(n, dtype=torch.uint8, device="cuda")
for _ in range(3): d.copy_(h, non_blocking=True)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(50): d.copy_(h, non_blocking=True)
torch.cuda.synchronize()
print("%.3f" % (50 * n / (time.perf_counter() - t) / 1e9))
EOF
)
[ -n "$pinned" ] || { echo "no torch/GPU: GPU lines skipped"; GPU=; }
# memcpy of 64 MiB in this host (GB/s), the host lines' baseline
memcpy=$($PY -c '
import time, ctypes
n = 64 << 20
a = bytearray(n); b = bytearray(n)
t = time.perf_counter()
for _ in range(20): b[:] = a
print("%.3f" % (20 * n / (time.perf_counter() - t) / 1e9))')

start() { # daemon flags...
  rm -f "$W/port"
  $B/gdrstored --listen 127.0.0.1:0 --port-file "$W/port" --volume vol0=4GiB \
    --max-op-size 256MiB --local-socket "$W/local.sock" "$@" > "$W/d.log" 2>&1 &
  DPID=$!
  for _ in $(seq 200); do [ -s "$W/port" ] && break; sleep 0.05; done
  ADDR=127.0.0.1:$(cat "$W/port")
  rm -f "$W"/agent*.sock
  $B/gdragent --daemon "$ADDR" --socket "$W/agent.sock" > "$W/a.log" 2>&1 &
  APID=$!
  $B/gdragent --daemon "$ADDR" --transport local --socket "$W/agent-local.sock" > "$W/al.log" 2>&1 &
  ALPID=$!
  for _ in $(seq 200); do
    [ -S "$W/agent.sock" ] && [ -S "$W/agent-local.sock" ] && break
    sleep 0.05
  done
  # the warm-up: the volume page-locked for GPU copies
  [ -n "$GPU" ] && $B/gdrctl --daemon "$ADDR" --transport local write -s 1MiB --gpu $GPU > /dev/null
}
stop() { kill $APID $ALPID $DPID 2>/dev/null; wait $APID $ALPID $DPID 2>/dev/null; }
gbps() { grep -o '[0-9.]* GB/s' | head -1 | cut -d' ' -f1; }
pathof() { grep -o 'path [^ ]*' | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
bench() { # how (direct flags or --agent SOCK), bench args
  local how=$1; shift
  $B/gdrctl $how bench "$@" 2>&1 | tail -3
}
line() { # label, result, baseline, baseline name
  printf '%-52s %8s GB/s   ratio %s vs %s (%s GB/s)   %s\n' "$1" "$(echo "$2" | gbps)" \
    "$(ratio "$(echo "$2" | gbps)" "$3")" "$4" "$3" "$(echo "$2" | pathof)"
}
# how, k processes, ops each, MiB per op, bench args: "SUM WALL", the sum of the processes' own
# GB/s (each over its own window, so above the link when the windows do not overlap) and all
# their bytes over the wall time of the batch (which includes each process's start-up)
many() {
  local how=$1 k=$2 n=$3 mib=$4; shift 4
  local pids=() i t0 t1
  t0=$(date +%s.%N)
  for i in $(seq 0 $((k - 1))); do
    $B/gdrctl $how bench -q -n $n -s ${mib}MiB -o $((i * 256))MiB --span 256MiB "$@" \
      > "$W/m$i.out" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  t1=$(date +%s.%N)
  cat "$W"/m*.out | grep -o '[0-9.]* GB/s' |
    awk -v k=$k -v n=$n -v m=$mib -v t="$(echo "$t0 $t1" | awk '{ print $2 - $1 }')" \
      '{ s += $1 } END { printf "%.3f %.3f", s, k * n * m * 1048576 / t / 1e9 }'
  rm -f "$W"/m*.out
}

for T in 4 8; do
  start --local-copy-threads $T
  D="--daemon $ADDR"
  if [ -n "$GPU" ]; then
    for qd in 1 2 4; do
      r=$(bench "$D --transport local" -q -t write -s 64MiB -n 128 --qd $qd --span 4GiB --gpu $GPU)
      line "local gpu 64MiB qd$qd, $T copy threads" "$r" "$pinned" "pinned H2D"
    done
  fi
  r=$(bench "$D --transport local" -q -t write -s 64MiB -n 64 --qd 2 --span 4GiB)
  line "local host 64MiB qd2, $T copy threads" "$r" "$memcpy" "memcpy"
  stop
done

start
D="--daemon $ADDR"
for mem in host gpu; do
  [ $mem = gpu ] && [ -z "$GPU" ] && continue
  g=""; [ $mem = gpu ] && g="--gpu $GPU"
  direct=$(bench "$D --transport tcp" -q -t write -s 64MiB -n 64 --qd 2 --span 4GiB $g)
  agent=$(bench "--agent $W/agent.sock" -q -t write -s 64MiB -n 64 --qd 2 --span 4GiB $g)
  line "direct tcp $mem 64MiB qd2" "$direct" "$(echo "$direct" | gbps)" "itself"
  line "agent (tcp upstream) $mem 64MiB qd2" "$agent" "$(echo "$direct" | gbps)" "direct tcp"
done
if [ -n "$GPU" ]; then
  for via in agent-local agent-tcp local tcp; do
    case $via in
      agent-local) how="--agent $W/agent-local.sock" ;;
      agent-tcp) how="--agent $W/agent.sock" ;;
      *) how="$D --transport $via" ;;
    esac
    read -r s w <<<"$(many "$how" 8 1024 16 -t write --qd 2 --gpu $GPU)"
    printf '%-44s %8s GB/s (sum), %8s GB/s (wall)   ratio %s / %s vs pinned H2D (%s GB/s)\n' \
      "8 processes gpu 16MiB qd2 via $via" "$s" "$w" "$(ratio "$s" "$pinned")" \
      "$(ratio "$w" "$pinned")" "$pinned"
  done
fi
stop
