#!/usr/bin/env bash
# Issue 45's targets in one call on the GPU host: each part runs the product's measurement and
# its baseline in this run, and one table at the end gives target, product, baseline, ratio,
# aim and met (bench/limits.py report).
#   1. checkpoint restore and save with every GPU (up to 4) vs that many concurrent pinned
#      copies (torch, 1 GiB, one process per GPU, all at once), and the slowest rank vs the
#      ranks' mean (python -m gdrstore.workload checkpoint, local transport, memory volumes);
#   2. 4 KiB unary p50 vs an empty RPC; Stream qd 32 vs unary qd 32 (gdr_bench --only lat rate),
#      and, as info lines, the same Stream split into messages of at most 8 and 16 ops;
#   3. 4 KiB ops at 16 clients vs 8 (gdr_bench --only scale, its small-op lines);
#   4. 8 clients' tcp Writes into GPU vs host memory (gdr_bench --only scale --gpu);
#   5. local 64 MiB gets into GPU at qd 1 vs a pinned 64 MiB copy (gdrctl bench, as
#      bench/agent_paths.sh).
# A part that needs a GPU (or torch with CUDA) writes SKIP with the reason where there is none.
# Each part runs under its own timeout, in its own process group, so a hang costs that part only;
# the whole run stays within --budget seconds (default 480).
#
# usage: bench/limits.sh [--quick] [--carry DIR | --build DIR] [--out DIR] [--budget S]
#                        [--parts LIST] [--daemon-flag F ...]
#   --carry DIR  binaries as scripts/gpu-carry.sh packs them (DIR/bin, DIR/lib); default: the
#                build tree --build (default ./build)
#   --out DIR    each part's raw JSON and logs, the run's lines (run.txt), the table
#                (limits.txt) and limits.json (default out/limits-DATE)
#   --quick      small counts (a 2-core machine: checks the script, measures nothing)
#   --parts LIST only these parts, e.g. 1,4 (default: all; the others are listed as skipped)
#   --daemon-flag F  an extra flag for every gdrstored the run starts (repeatable; one word
#                each, e.g. --daemon-flag=--local-copy-threads=16): a knob measured against
#                the defaults, with the same script
# Environment: PYTHON (default python3; torch with CUDA for parts 1 and 5).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)

if [[ ${1:-} == --part ]]; then
  PART=$2
else
  PART=
  QUICK=0 CARRY='' BUILD=$SRC/build OUT='' BUDGET=480 PARTS=1,2,3,4,5 DAEMON_FLAGS=''
  while (($#)); do
    case $1 in
      --quick) QUICK=1 ;;
      --carry) CARRY=${2:?--carry needs a directory}; shift ;;
      --build) BUILD=${2:?--build needs a directory}; shift ;;
      --out) OUT=${2:?--out needs a directory}; shift ;;
      --budget) BUDGET=${2:?--budget needs seconds}; shift ;;
      --parts) PARTS=${2:?--parts needs a list}; shift ;;
      --daemon-flag) DAEMON_FLAGS+=" ${2:?--daemon-flag needs a flag}"; shift ;;
      --daemon-flag=*) DAEMON_FLAGS+=" ${1#--daemon-flag=}" ;;
      -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "limits.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  [[ $BUDGET =~ ^[0-9]+$ ]] || { echo "limits.sh: --budget '$BUDGET' is not seconds" >&2; exit 2; }
  [[ $PARTS =~ ^[1-5](,[1-5])*$ ]] ||
    { echo "limits.sh: --parts '$PARTS' is not a list of parts 1-5 (e.g. 1,4)" >&2; exit 2; }
  if [[ -n $CARRY ]]; then
    CARRY=$(cd "$CARRY" && pwd) || exit 2
    export LD_LIBRARY_PATH=$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    GDRSTORED=$CARRY/bin/gdrstored GDRCTL=$CARRY/bin/gdrctl BENCH=$CARRY/bin/gdr_bench
    export GDRSTORE_LIBRARY=$CARRY/lib/libgdrclient.so.1
  else
    BUILD=$(cd "$BUILD" && pwd) || exit 2
    GDRSTORED=$BUILD/daemon/gdrstored GDRCTL=$BUILD/client/gdrctl BENCH=$BUILD/bench/gdr_bench
    export GDRSTORE_LIBRARY=${GDRSTORE_LIBRARY:-$BUILD/client/libgdrclient.so.1}
  fi
  for b in "$GDRSTORED" "$GDRCTL" "$BENCH"; do
    [[ -x $b ]] || { echo "limits.sh: $b is missing (build it, or give --carry)" >&2; exit 2; }
  done
  OUT=${OUT:-$SRC/out/limits-$(date -u +%Y%m%dT%H%M%S)}
  mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
  exec > >(tee "$OUT/run.txt")  # the whole run's lines, kept beside its JSON
  export QUICK GDRSTORED GDRCTL BENCH OUT SRC DAEMON_FLAGS
  export PY=${PYTHON:-python3}
  export PYTHONPATH=$SRC/python${PYTHONPATH:+:$PYTHONPATH}
fi

# ---- the parts (each run as `limits.sh --part N` under timeout, settings from the environment)

skip() { echo "$*" >"$OUT/part$PART.skip"; echo "part $PART: SKIP: $*"; exit 0; }
need_gpu() { [[ -n $GPU_PCIS ]] || skip "no GPU: $GPU_WHY"; }
need_torch() { [[ -z $TORCH_WHY ]] || skip "$TORCH_WHY"; }

# --daemon-flag's words: as given to start_daemon, and as gdr_bench passes them on.
read -ra EXTRA <<<"${DAEMON_FLAGS:-}"
BENCH_EXTRA=()
for f in ${EXTRA[@]+"${EXTRA[@]}"}; do BENCH_EXTRA+=("--daemon-flag=$f"); done

DPID=
start_daemon() { # extra gdrstored flags...; sets ADDR and SOCK
  local w=$OUT/part$PART-daemon
  rm -rf "$w" && mkdir -p "$w"
  SOCK=$w/local.sock
  "$GDRSTORED" --listen 127.0.0.1:0 --port-file "$w/port" --local-socket "$SOCK" \
    --max-op-size 256MiB --log-level warning ${EXTRA[@]+"${EXTRA[@]}"} "$@" \
    >"$OUT/part$PART-daemon.log" 2>&1 &
  DPID=$!
  for _ in $(seq 600); do # start-up poll, 30 s at most
    [[ -s $w/port ]] && "$GDRCTL" -p "$(cat "$w/port")" info >/dev/null 2>&1 && break
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.05
  done
  [[ -s $w/port ]] || { echo "gdrstored did not start:" >&2; cat "$OUT/part$PART-daemon.log" >&2;
                        exit 1; }
  ADDR=127.0.0.1:$(cat "$w/port")
}
stop_daemon() {
  [[ -n $DPID ]] || return 0
  kill -TERM "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; DPID=
}

part2() { # gdr_bench's latency and rate groups (one daemon, its defaults)
  local q=()
  ((QUICK)) && q=(--repeats 1 --warmup 0 --lat-ops 200 --rate-ops 2000)
  # Beside the rate line (the target's), its Stream split into smaller messages (issue 45:
  # whether overlapping parts of the batch beats one message per batch where cores are idle),
  # and the same Stream over 1 call (as before the client spread a Stream over 4) and over 8.
  "$BENCH" --daemon "$GDRSTORED" ${BENCH_EXTRA[@]+"${BENCH_EXTRA[@]}"} --only lat rate --stream-batch 8 --stream-batch 16 \
    --stream-calls 1 --stream-calls 8 --json \
    "${q[@]}" >"$OUT/part2-lat-rate.json"
}

part3() { # the scale group's small-op lines at 8 and 16 clients
  # Its bulk lines run first whatever is asked; small here (8 x 4 MiB a client), as they are
  # not this target. Each small-op line is fresh client processes after a warm-up run.
  local q=(--scale-size 4MiB --scale-ops 8)
  ((QUICK)) && q=(--scale-size 1MiB --scale-ops 2 --scale-small-ops 500 --repeats 1 --warmup 0)
  "$BENCH" --daemon "$GDRSTORED" ${BENCH_EXTRA[@]+"${BENCH_EXTRA[@]}"} --only scale --scale-clients 8,16 --scale-many '' "${q[@]}" \
    --scale-plot "$OUT/part3-plot.png" --json >"$OUT/part3-scale.json"
}

part4() { # the scale group's GPU line alone: 8 clients into GPU memory vs 8 into host memory
  need_gpu
  local q=()
  ((QUICK)) && q=(--scale-ops 8 --repeats 1)
  "$BENCH" --daemon "$GDRSTORED" ${BENCH_EXTRA[@]+"${BENCH_EXTRA[@]}"} --only scale --scale-clients '' --scale-many '' \
    --gpu "${GPU_PCIS%%,*}" "${q[@]}" --scale-plot "$OUT/part4-plot.png" --json \
    >"$OUT/part4-scale-gpu.json"
}

part5() { # local 64 MiB gets into GPU memory, qd 1 (and 2), vs a pinned 64 MiB copy
  need_gpu
  need_torch
  local n=128 pci=${GPU_PCIS%%,*} i qd
  ((QUICK)) && n=8
  trap stop_daemon EXIT
  start_daemon --volume vol0=4GiB
  # The daemon page-locks the volume on its first GPU op (seconds for GiBs): paid here.
  "$GDRCTL" --daemon "$ADDR" --transport local write -s 1MiB --gpu "$pci" >/dev/null || return 1
  for i in 0 1 2; do
    for qd in 1 2; do
      "$GDRCTL" --daemon "$ADDR" --transport local bench -t write -s 64MiB -n "$n" --qd "$qd" \
        --span 4GiB --gpu "$pci" --json >"$OUT/part5-local-qd$qd-$i.json" || return 1
    done
  done
  stop_daemon
  "$PY" "$SRC/bench/limits.py" copies --gpus "${GPU_ORDS%%,*}" --size 64MiB --repeats 5 \
    --batch 16 --out "$OUT/part5-copies.json"
}

part1() { # checkpoint save and restore with every GPU (up to 4) vs as many pinned copies
  need_gpu
  need_torch
  local ngpu scale mem_gib cap size=1GiB interval=2
  ngpu=$(tr ',' '\n' <<<"$GPU_PCIS" | wc -l)
  # 1/8 of llama3-8b (104.7 GiB a checkpoint) per GPU, as docs/benchmarks.md's 4-GPU runs
  # (--scale 0.5), within 40 % of the host's memory for the 3 checkpoints' memory volumes.
  # 2 s of compute before each checkpoint (DLIO's default is 5): the daemon page-locks the
  # volumes made for the run in the background once GPU copies pause, as between checkpoints.
  scale=$(awk -v n="$ngpu" 'BEGIN { printf "%.4f", 0.125 * n }')
  ((QUICK)) && scale=$(awk -v n="$ngpu" 'BEGIN { printf "%.4f", 0.01 * n }') size=256MiB \
    interval=0
  mem_gib=$(awk '/^MemTotal:/ { print int($2 / 1048576) }' /proc/meminfo)
  cap=$(awk -v m="$mem_gib" 'BEGIN { printf "%.4f", 0.4 * m / (3 * 104.7) }')
  scale=$(awk -v s="$scale" -v c="$cap" 'BEGIN { print (s < c ? s : c) }')
  echo "part 1: $ngpu GPU(s) ($GPU_PCIS), llama3-8b --scale $scale, host memory $mem_gib GiB"
  "$PY" "$SRC/bench/limits.py" copies --gpus "$GPU_ORDS" --size "$size" --repeats 5 \
    --out "$OUT/part1-copies.json" || return 1
  trap stop_daemon EXIT
  start_daemon
  "$PY" -m gdrstore.workload checkpoint --daemon "$ADDR" --transport local \
    --local-socket "$SOCK" --gpu "$GPU_PCIS" --model llama3-8b --scale "$scale" \
    --num-checkpoints-write 3 --num-checkpoints-read 3 --interval "$interval" --prefix limits \
    --json >"$OUT/part1-checkpoint.json"
}

if [[ -n $PART ]]; then
  "part$PART"
  exit
fi

# ---- the run

# The GPUs as CUDA sees them (gdrctl topo): ordinals (torch's) and PCI addresses (the
# workload's and gdr_bench's --gpu), at most 4 (the issue's targets are for 4).
topo=$("$GDRCTL" topo 2>&1)
GPU_ORDS=$(awk '/^CUDA devices:$/ { f = 1; next } f && $1 ~ /^[0-9]+$/ && $2 ~ /:/ { print $1 }' \
             <<<"$topo" | head -4 | paste -sd, -)
GPU_PCIS=$(awk '/^CUDA devices:$/ { f = 1; next } f && $1 ~ /^[0-9]+$/ && $2 ~ /:/ { print $2 }' \
             <<<"$topo" | head -4 | paste -sd, -)
HOST_GPUS=$(awk '/^CUDA devices:$/ { f = 1; next } f && $1 ~ /^[0-9]+$/ && $2 ~ /:/' <<<"$topo" |
              wc -l)
GPU_WHY=$(grep -m1 '^CUDA devices: ' <<<"$topo" | sed 's/^CUDA devices: //')
GPU_WHY=${GPU_WHY:-gdrctl topo lists no CUDA device}
TORCH_WHY=
if [[ -n $GPU_PCIS ]] &&
   ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
then
  TORCH_WHY="$PY has no torch with CUDA (the pinned-copy baselines need it)"
fi
export GPU_ORDS GPU_PCIS GPU_WHY TORCH_WHY

echo "limits.sh: $(date -u +%FT%TZ), $(nproc) CPUs, quick=$QUICK, out $OUT"
echo "binaries: $GDRSTORED (and gdrctl, gdr_bench beside it)"
[[ -n ${DAEMON_FLAGS// /} ]] && echo "gdrstored flags added by --daemon-flag:$DAEMON_FLAGS"
if [[ -n $GPU_PCIS ]]; then
  echo "GPUs: the host has $HOST_GPUS; parts 1, 4, 5 use ${GPU_PCIS//,/ } (ordinals $GPU_ORDS)"
  awk '/^CUDA devices:$/ { f = 1; next } f && $1 ~ /^[0-9]+$/ && $2 ~ /:/' <<<"$topo"
else
  echo "GPUs: none ($GPU_WHY)"
fi

# part, timeout (s), estimate on the GPU host: cheap parts first, so the checkpoint part (the
# longest) cannot starve them; the table lists them by target.
PLAN=("2 60 ~25 s: lat 2000 ops x 2 x 6, rate 20000 ops x 6 x 6 (batch 0, 8, 16; calls 1, 8)"
      "3 120 ~30 s: 8 and 16 clients, 20000 4 KiB ops each, 3 runs + 1 warm-up"
      "4 60 ~25 s: 8 clients x 128 x 16 MiB into host then GPU memory, 3 runs"
      "5 60 ~20 s: 6 gdrctl runs of 128 x 64 MiB, torch copies"
      "1 200 ~100 s: copies 1 GiB x 5; 8 ranks spawned twice, 3 checkpoints written, 3 read")
t0=$SECONDS
for p in "${PLAN[@]}"; do
  read -r n limit est <<<"$p"
  left=$((BUDGET - (SECONDS - t0)))
  ((limit > left)) && limit=$left
  rm -f "$OUT/part$n".{skip,status}
  if [[ ,$PARTS, != *,$n,* ]]; then
    echo "not asked for (--parts $PARTS)" >"$OUT/part$n.skip"
    echo skipped >"$OUT/part$n.status"
    echo "part $n: SKIP: not asked for"
    continue
  fi
  if ((limit < 10)); then
    echo "no time left in the --budget" >"$OUT/part$n.skip"
    echo "part $n: SKIP: no time left"
    continue
  fi
  echo "part $n: timeout ${limit} s; on the GPU host $est"
  s=$SECONDS
  timeout -k 10 "$limit" bash "$0" --part "$n" 2>"$OUT/part$n.log"
  rc=$?
  if ((rc == 0)) && [[ -s $OUT/part$n.skip ]]; then
    echo skipped >"$OUT/part$n.status"
  elif ((rc == 0)); then
    echo ok >"$OUT/part$n.status"
  elif ((rc == 124 || rc == 137)); then
    echo "timed out after $limit s (log: part$n.log)" >"$OUT/part$n.status"
  else
    echo "exit $rc: $(grep -v '^\s' "$OUT/part$n.log" | grep -v '^$' | tail -1)" >"$OUT/part$n.status"
  fi
  echo "part $n: $(cat "$OUT/part$n.status"), $((SECONDS - s)) s"
done
echo
"$PY" "$SRC/bench/limits.py" report "$OUT" | tee "$OUT/limits.txt"
echo "total $((SECONDS - t0)) s; JSON: $OUT/limits.json"
