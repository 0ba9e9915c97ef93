#!/usr/bin/env bash
# GPU-host checks of GPU memory on the tcp transport, against real device memory:
#   1. gdrctl topo and the CUDA view of the GPUs, and gdrctl doctor (printed: its FAILs are facts
#      of this host, e.g. no RDMA NIC; only a crash fails the step);
#   2. gdrstored + verified gdrctl Writes (store -> GPU) and Reads (GPU -> store), 4 KiB .. 256 MiB,
#      by full PCI address, short B:D.F and CUDA ordinal;
#   3. two gdrctl clients on the same GPU at once, each verifying its own extents;
#   4. the GoogleTest suites that need a GPU (they skip elsewhere), among them GPU memory across
#      processes (gpu_ipc_test: a child imports cuMemAlloc memory by IPC handle and VMM memory by
#      descriptor, interior pointers too) and the local transport into GPU memory
#      (local_transport_test's GPU case: a real gdrstored imports both kinds and moves verified
#      bytes);
#   4b. the node agent: GPU memory handed to gdragent by CUDA IPC (gdrctl) and by VMM descriptor
#      (agent_vmm_check.py), moved upstream over tcp and, relayed as it came, over local; each
#      result's path checked, and --require / require= set;
#   5. gdr_bench --only gpu: tcp 64 MiB Writes into GPU memory vs pinned cuMemcpyHtoD;
#   6. the Python package on torch CUDA tensors and CuPy arrays, and docs/python.md's example;
#   6b. gdrstore.torch.memory_pool (memory_pool_check.py, its own gdrstored): tensors of 1 B,
#      2 MiB + 1 and 100 MiB in the pool are fd-shareable, RDMA-capable VMM memory, move over
#      local as local/vmm-fd verified both ways, and their memory is released with the pool.
# Usage: tests/gpu/run-gpu-tests.sh [BIN_DIR]   (BIN_DIR holds gdrstored, gdrctl, gdr_bench and the
# test binaries; default: ./build with its usual layout). Prints PASS/FAIL per step and exits
# non-zero when any step failed. Needs an NVIDIA GPU and driver; nothing else from CUDA.
set -uo pipefail

BIN=${1:-}
if [[ -z $BIN ]]; then
  B=build
  GDRSTORED=$B/daemon/gdrstored GDRCTL=$B/client/gdrctl BENCH=$B/bench/gdr_bench
  GDRAGENT=$B/agent/gdragent
  T_MEM=$B/tests/common/gpu_memory_test T_PATH=$B/tests/integration/gpu_data_path_test
  T_CTL=$B/tests/integration/gdrctl_gpu_test
  T_IPC=$B/tests/common/gpu_ipc_test T_LOCAL=$B/tests/integration/local_transport_test
else
  GDRSTORED=$BIN/gdrstored GDRCTL=$BIN/gdrctl BENCH=$BIN/gdr_bench GDRAGENT=$BIN/gdragent
  T_MEM=$BIN/gpu_memory_test T_PATH=$BIN/gpu_data_path_test T_CTL=$BIN/gdrctl_gpu_test
  T_IPC=$BIN/gpu_ipc_test T_LOCAL=$BIN/local_transport_test
fi
export GDR_GDRSTORED_BIN=$GDRSTORED GDR_GDRCTL_BIN=$GDRCTL
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# The Python package's library: beside gdrctl (a build tree) or, as scripts/gpu-carry.sh packs
# it, on LD_LIBRARY_PATH, where the package's loader finds it by name.
if [[ -z ${GDRSTORE_LIBRARY:-} && -f $(dirname "$GDRCTL")/libgdrclient.so.1 ]]; then
  export GDRSTORE_LIBRARY=$(dirname "$GDRCTL")/libgdrclient.so.1
fi
WORK=$(mktemp -d /tmp/gdr-gpu-tests.XXXXXX)
DAEMON_PID=
FAILED=0
cleanup() {
  if [[ -n $DAEMON_PID ]]; then kill -TERM "$DAEMON_PID" 2>/dev/null; wait "$DAEMON_PID" 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { echo; echo "=== $*"; }
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

step "host"
nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version,memory.total --format=csv,noheader || true
uname -r

step "gdrctl topo"
if "$GDRCTL" topo; then pass "topo"; else fail "topo"; fi
step "gdrctl doctor"
"$GDRCTL" doctor
doctor_rc=$?
if ((doctor_rc <= 1)); then pass "doctor ran (exit $doctor_rc)"; else fail "doctor exited $doctor_rc"; fi
GPU_PCI=$("$GDRCTL" topo | awk '/^CUDA devices:/{f=1;next} f&&$1=="0"{print $2; exit}')
if [[ -z $GPU_PCI ]]; then fail "no CUDA device 0 in gdrctl topo"; echo "FAILED steps: $FAILED"; exit 1; fi
GPU_SHORT=${GPU_PCI#0000:}
echo "GPU 0 is $GPU_PCI (short form $GPU_SHORT)"

step "gdrstored"
mkdir -p "$WORK/ckpt"
"$GDRSTORED" --listen 127.0.0.1:0 --port-file "$WORK/port" --volume vol0=1GiB --volume rw=1GiB \
  --volume "filed=256MiB,file=$WORK/filed.vol" --volume-dir "$WORK/ckpt,writable" \
  --max-op-size 256MiB --local-socket "$WORK/local.sock" --log-level warning \
  >"$WORK/gdrstored.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 600); do [[ -s $WORK/port ]] && break; sleep 0.05; done  # start-up poll, 30 s at most
PORT=$(cat "$WORK/port" 2>/dev/null)
if [[ -z $PORT ]] || ! "$GDRCTL" -p "$PORT" info >/dev/null; then
  fail "gdrstored did not come up"; cat "$WORK/gdrstored.log"; exit 1
fi
pass "gdrstored on 127.0.0.1:$PORT (pid $DAEMON_PID)"
CTL=("$GDRCTL" -p "$PORT")

step "verified Writes and Reads into GPU memory, 4 KiB .. 256 MiB"
i=0
for size in 4KiB 64KiB 1MiB 4MiB 16MiB 64MiB 256MiB; do
  case $((i % 3)) in 0) gpu=$GPU_PCI ;; 1) gpu=$GPU_SHORT ;; 2) gpu=0 ;; esac
  i=$((i + 1))
  if "${CTL[@]}" write --gpu "$gpu" --volume vol0 -o 4096 -s "$size" --verify; then
    pass "write $size --gpu $gpu"
  else fail "write $size --gpu $gpu"; fi
  if "${CTL[@]}" read --gpu "$gpu" --volume rw -o 0 -s "$size" --salt $((i + 10)) --verify; then
    pass "read $size --gpu $gpu"
  else fail "read $size --gpu $gpu"; fi
done
if "${CTL[@]}" write --gpu "$GPU_PCI" --volume vol0 -o 12345 -s 3MiB --buffer-offset 7 --verify; then
  pass "unaligned write (volume offset 12345, buffer offset 7)"
else fail "unaligned write"; fi
if "${CTL[@]}" write --gpu 0000:ff:1f.7 -s 4KiB 2>"$WORK/err"; then
  fail "--gpu naming no GPU succeeded"
elif grep -q "GPUs present: 0 $GPU_PCI" "$WORK/err"; then
  pass "--gpu naming no GPU: $(cat "$WORK/err")"
else fail "--gpu error text: $(cat "$WORK/err")"; fi

step "two clients on the same GPU at once"
pids=()
for c in 0 1; do
  (
    for r in 0 1 2 3 4 5 6 7; do
      off=$(( (c * 8 + r) * 32 * 1048576 ))
      "${CTL[@]}" write --gpu "$GPU_PCI" --volume vol0 -o $off -s 32MiB --verify || exit 1
      "${CTL[@]}" read --gpu "$GPU_PCI" --volume rw -o $off -s 32MiB --salt $((100 + c * 8 + r)) --verify || exit 1
    done
  ) >"$WORK/client$c.log" 2>&1 &
  pids+=($!)
done
for c in 0 1; do
  if wait "${pids[$c]}"; then pass "client $c: 8 verified 32 MiB writes + 8 verified reads"
  else fail "client $c"; cat "$WORK/client$c.log"; fi
done
"${CTL[@]}" bench --gpu "$GPU_PCI" -t write -s 64MiB -n 32 --qd 2 -q &
b0=$!
"${CTL[@]}" bench --gpu "$GPU_SHORT" -t read -s 64MiB -n 32 --qd 2 -q -o 268435456 &
b1=$!
if wait $b0 && wait $b1; then pass "two concurrent gdrctl bench runs on one GPU"; else fail "concurrent bench"; fi

step "GoogleTest suites that need a GPU"
for t in "$T_MEM" "$T_PATH" "$T_IPC"; do
  if "$t" --gtest_brief=1; then pass "$(basename "$t")"; else fail "$(basename "$t")"; fi
done
if "$T_LOCAL" --gtest_brief=1 --gtest_filter='*Gpu*'; then
  pass "$(basename "$T_LOCAL") (GPU memory over local)"
else fail "$(basename "$T_LOCAL")"; fi
if "$T_CTL" --gtest_brief=1 --gtest_filter='*VerifiedWriteAndReadIntoGpu*:*MalformedGpu*'; then
  pass "$(basename "$T_CTL")"
else fail "$(basename "$T_CTL")"; fi

step "local: GPU memory and a file-backed volume (locked read-only: puts through bounce buffers)"
if "${CTL[@]}" --transport local --require local,cuda-ipc read --gpu "$GPU_PCI" --volume filed \
     -o 4097 -s 64MiB --salt 41 --verify >"$WORK/filed.out" 2>&1 &&
   "${CTL[@]}" --transport local write --gpu "$GPU_PCI" --volume filed -o 4097 -s 64MiB \
     --salt 41 --verify >>"$WORK/filed.out" 2>&1 &&
   "${CTL[@]}" --transport local write --gpu "$GPU_PCI" --volume filed -o 128MiB -s 8MiB \
     --verify >>"$WORK/filed.out" 2>&1; then
  pass "local: verified 64 MiB put and get of GPU memory on a file-backed volume"
else fail "local, file-backed volume: $(cat "$WORK/filed.out")"; fi
"${CTL[@]}" info 2>&1 | grep -o "page-locked for GPU copies: [^;]*; [0-9]* GPU copies staged[^)]*" |
  head -1 | sed 's/^/  daemon: /'

step "the node agent: GPU memory through gdragent (upstream tcp, and local relaying the handle)"
for up in tcp local; do
  "$GDRAGENT" --daemon "127.0.0.1:$PORT" --transport $up --socket "$WORK/agent-$up.sock" \
    --log-level warning >"$WORK/agent-$up.log" 2>&1 &
  apid=$!
  for _ in $(seq 1 600); do [[ -S $WORK/agent-$up.sock ]] && break; sleep 0.05; done
  way=staged; [[ $up == local ]] && way=cuda-ipc
  want="path agent/cuda-ipc>$up/$way"
  if "$GDRCTL" --agent "$WORK/agent-$up.sock" --require "agent,$up,$way" write --gpu "$GPU_PCI" \
       --volume vol0 -o 8193 -s 64MiB --verify >"$WORK/agent.out" 2>&1 &&
     grep -q "$want" "$WORK/agent.out" &&
     "$GDRCTL" --agent "$WORK/agent-$up.sock" read --gpu "$GPU_PCI" --volume rw -o 4096 \
       -s 64MiB --salt 77 --verify >>"$WORK/agent.out" 2>&1; then
    pass "agent over $up: verified 64 MiB write and read in GPU memory ($want)"
  else fail "agent over $up: $(cat "$WORK/agent.out" "$WORK/agent-$up.log")"; fi
  vway=staged; [[ $up == local ]] && vway=vmm-fd
  if PYTHONPATH=$SRC/python python3 "$SRC/tests/gpu/agent_vmm_check.py" "$WORK/agent-$up.sock" \
       "agent/vmm-fd>$up/$vway"; then
    pass "agent over $up: VMM memory (agent/vmm-fd>$up/$vway)"
  else fail "agent over $up: VMM memory"; fi
  kill -TERM $apid; wait $apid 2>/dev/null
done

step "gdr_bench --only gpu"
if "$BENCH" --daemon "$GDRSTORED" --only gpu --gpu "$GPU_PCI" --bw-qd 1 --bw-qd 2; then
  pass "gdr_bench"
else fail "gdr_bench"; fi

step "Python: torch CUDA tensors and CuPy arrays (python/gdrstore over libgdrclient.so)"
if PYTHONPATH=$SRC/python python3 "$SRC/tests/gpu/python_gpu_check.py" "127.0.0.1:$PORT"; then
  pass "python GPU checks"
else fail "python GPU checks"; fi

step "gdrstore.torch.memory_pool: tensors in VMM memory over local (1 B, 2 MiB + 1, 100 MiB)"
if PYTHONPATH=$SRC/python python3 "$SRC/tests/gpu/memory_pool_check.py" "$GDRSTORED"; then
  pass "memory pool checks"
else fail "memory pool checks"; fi

step "safetensors: CUDA state dicts saved to and loaded from the store (tcp, local)"
if PYTHONPATH=$SRC/python python3 "$SRC/tests/gpu/safetensors_gpu_check.py" "127.0.0.1:$PORT" \
    "$WORK/ckpt"; then
  pass "safetensors GPU checks"
else fail "safetensors GPU checks"; fi

step "workloads: train, checkpoint and kvcache with their ranks on the GPU (tcp, local)"
if PYTHONPATH=$SRC/python python3 "$SRC/tests/gpu/workload_gpu_check.py" "127.0.0.1:$PORT" \
    "$GPU_PCI" "$WORK/ckpt"; then
  pass "workload GPU checks"
else fail "workload GPU checks"; fi

step "docs/python.md's example, as written (its own daemon on 127.0.0.1:50051)"
"$GDRSTORED" --listen 127.0.0.1:50051 --volume vol0=256MiB --log-level warning \
  >"$WORK/example-daemon.log" 2>&1 &
EXAMPLE_PID=$!
for _ in $(seq 1 600); do "$GDRCTL" -p 50051 info >/dev/null 2>&1 && break; sleep 0.05; done
awk '/^```python$/{f=1;next} /^```$/{if(f)exit} f' "$SRC/docs/python.md" >"$WORK/example.py"
if PYTHONPATH=$SRC/python python3 "$WORK/example.py"; then
  pass "docs/python.md example"
else fail "docs/python.md example"; fi
kill -TERM "$EXAMPLE_PID"; wait "$EXAMPLE_PID" 2>/dev/null

step "the pod view: a workload in its own namespaces loads through the agent (tests/gpu/pod_view.sh)"
# The wheel scripts/build-wheel.sh made (scripts/gpu-carry.sh packs it beside bin/ and lib/).
WHEEL=${GDR_WHEEL:-$(ls "$(dirname "$GDRAGENT")"/../*.whl 2>/dev/null | head -1)}
if [[ -z $WHEEL ]]; then
  fail "pod view: no wheel (set GDR_WHEEL or carry one beside bin/)"
elif [[ $(id -u) != 0 ]]; then
  fail "pod view: needs root (namespaces and uids of its own)"
elif bash "$SRC/tests/gpu/pod_view.sh" "$(dirname "$GDRAGENT")" "$WHEEL"; then
  pass "pod view"
else fail "pod view"; fi

echo
if ((FAILED == 0)); then echo "ALL GPU CHECKS PASSED"; else echo "FAILED steps: $FAILED"; fi
exit $((FAILED > 0))
