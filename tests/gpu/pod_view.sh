#!/usr/bin/env bash
# The pod view on the GPU host (docs/agent.md, "Across namespaces"): gdrstored serves a
# safetensors checkpoint with --volume-dir; gdragent runs as the DaemonSet runs it (its own mount
# and IPC namespaces, the host's PID namespace: deploy/k8s); a workload runs as an unprivileged
# uid in its own IPC, PID and mount namespaces with only the agent's socket and a venv (made
# with --system-site-packages from the host's python3, standing for a workload image) where the
# wheel is installed. It loads the checkpoint with each PyTorch allocator and CuPy, verified
# against safetensors' own load (tests/gpu/pod_load_check.py). Then the table of what each
# handle kind needs: the agent in the host's namespaces, as the manifests run it, and in its own
# PID namespace too, with memory from cudaMalloc (CUDA IPC) and from the gdrstore pool (VMM fd).
# usage: tests/gpu/pod_view.sh BIN_DIR WHEEL   (as root; prints PASS/FAIL and TABLE lines)
# POD_ALLOCATORS, POD_TABLE_ROWS ("NAME:UNSHARE_FLAGS ...") and POD_TABLE_MEMORY narrow a run.
set -uo pipefail
BIN=${1:?usage: pod_view.sh BIN_DIR WHEEL}
WHEEL=${2:?usage: pod_view.sh BIN_DIR WHEEL}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
POD_UID=10002
WORK=$(mktemp -d /tmp/gdr-pod.XXXXXX)
chmod 0755 "$WORK"
PIDS=()
FAILED=0
# unshare --fork ignores SIGTERM while it waits for its child, so each child is signalled itself
# (pkill -P: the children of a process this script started), then the unshare it leaves.
cleanup() {
  for p in "${PIDS[@]}"; do
    pkill -TERM -P "$p" 2>/dev/null
    kill -TERM "$p" 2>/dev/null
    timeout 20 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

# A Llama-like shard: some tensors larger than PyTorch's 20 MiB expandable-segment chunks.
mkdir -p "$WORK/ckpt"
python3 - "$WORK/ckpt/model.safetensors" <<'PY' || { fail "making the checkpoint"; exit 1; }
import sys, torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(11)
sd = {}
for i in range(4):
    for n, s in [("q", (2048, 2048)), ("k", (512, 2048)), ("v", (512, 2048)), ("o", (2048, 2048)),
                 ("gate", (5632, 2048)), ("up", (5632, 2048)), ("down", (2048, 5632))]:
        sd[f"layers.{i}.{n}.weight"] = torch.randn(s, generator=g).to(torch.bfloat16)
    sd[f"layers.{i}.norm.weight"] = torch.randn(2048, generator=g)
sd["embed.weight"] = torch.randn(32000, 2048, generator=g).to(torch.bfloat16)
save_file(sd, sys.argv[1], metadata={"format": "pt"})
PY
chmod -R a+rX "$WORK/ckpt"
echo "checkpoint: $(du -h "$WORK/ckpt/model.safetensors" | cut -f1)"

"$BIN/gdrstored" --listen 127.0.0.1:0 --port-file "$WORK/port" --volume-dir "$WORK/ckpt" \
  --local-socket "$WORK/local.sock" --log-level warning >"$WORK/gdrstored.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 600); do [[ -s $WORK/port ]] && break; sleep 0.05; done
PORT=$(cat "$WORK/port" 2>/dev/null)
[[ -n $PORT ]] || { fail "gdrstored did not come up: $(cat "$WORK/gdrstored.log")"; exit 1; }

# The workload image: the host's python3 in a venv, the wheel installed offline.
# Where the host's python3 is itself a venv (torch installed in it), --system-site-packages
# reaches only its base interpreter's packages: a .pth adds the image's own.
python3 -m venv --system-site-packages "$WORK/venv" >"$WORK/venv.log" 2>&1 ||
  { fail "venv: $(cat "$WORK/venv.log")"; exit 1; }
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
if python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  purelib python3 >"$(purelib "$WORK/venv/bin/python")/image.pth"
fi
if "$WORK/venv/bin/pip" install --no-deps --no-index -q "$WHEEL" >>"$WORK/venv.log" 2>&1; then
  chmod -R a+rX "$WORK/venv"
  pass "wheel installed into a venv: $(basename "$WHEEL")"
else fail "wheel install: $(cat "$WORK/venv.log")"; exit 1; fi

# What the other uids run, where they can read it (the tree may sit in root's home).
mkdir -p "$WORK/bin" "$WORK/lib"
cp "$BIN/gdragent" "$WORK/bin/" && cp "$SRC/tests/gpu/pod_load_check.py" "$WORK/bin/"
[[ -n ${LD_LIBRARY_PATH:-} ]] && cp -L "${LD_LIBRARY_PATH%%:*}"/*.so* "$WORK/lib/" 2>/dev/null
chmod -R a+rX "$WORK/bin" "$WORK/lib"

# start_agent NAME UNSHARE_FLAGS...: gdragent upstream tcp as the DaemonSet's uid, its socket
# in a directory it owns.
AGENT_UID=10001
start_agent() {
  local name=$1; shift
  mkdir -p "$WORK/$name"; chown $AGENT_UID:$AGENT_UID "$WORK/$name"; chmod 0755 "$WORK/$name"
  unshare "$@" --fork --kill-child=SIGTERM setpriv --reuid=$AGENT_UID --regid=$AGENT_UID --clear-groups \
    env LD_LIBRARY_PATH="$WORK/lib" "$WORK/bin/gdragent" --daemon "127.0.0.1:$PORT" --transport tcp \
    --socket "$WORK/$name/agent.sock" --socket-mode 0666 --allow-uid $POD_UID \
    --log-level warning \
    >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 600); do [[ -S $WORK/$name/agent.sock ]] && break; sleep 0.05; done
  [[ -S $WORK/$name/agent.sock ]]
}

# pod SOCKET ALLOCATOR [ENV...]: the workload in its own namespaces as uid POD_UID. Prints its
# RESULT line, or the end of what it printed.
NPOD=0
pod() {
  local sock=$1 alloc=$2; shift 2
  NPOD=$((NPOD + 1))
  local log=$WORK/pod-$NPOD.log
  timeout -k 5 150 unshare --ipc --pid --mount --fork --kill-child --mount-proc \
    setpriv --reuid=$POD_UID --regid=$POD_UID --clear-groups \
    env -i PATH=/usr/bin:/bin HOME="$WORK/home" GDRSTORE_AGENT="$sock" "$@" \
    "$WORK/venv/bin/python" "$WORK/bin/pod_load_check.py" "$alloc" model.safetensors \
    "$WORK/ckpt/model.safetensors" >"$log" 2>&1
  local line
  line=$(grep '^RESULT' "$log" | tail -1)
  [[ -n $line ]] || line="RESULT $alloc fail (exit $?) $(tail -6 "$log" | tr '\n' ' ' | cut -c1-700)"
  echo "$line"
}
mkdir -p "$WORK/home" && chown $POD_UID:$POD_UID "$WORK/home"

# The image's Python as the pod's uid sees it.
setpriv --reuid=$POD_UID --regid=$POD_UID --clear-groups env -i PATH=/usr/bin:/bin \
  HOME="$WORK/home" "$WORK/venv/bin/python" -c \
  "import sys, torch, safetensors, gdrstore, gdrstore._native as n; print('pod python', sys.version.split()[0], 'torch', torch.__version__, 'gdrstore', gdrstore.__version__, n.path)" \
  2>&1 | tail -4

# The agent as the manifests run it: own mount and IPC namespaces, the host's PID namespace.
if start_agent manifest --mount --ipc; then
  for alloc in ${POD_ALLOCATORS:-default expandable pool cupy}; do
    env=()
    [[ $alloc == expandable ]] && env=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
    line=$(pod "$WORK/manifest/agent.sock" "${alloc/expandable/default}" ${env[@]+"${env[@]}"})
    if [[ $line == *" ok "* ]]; then pass "pod, $alloc: ${line#RESULT * ok }"
    else fail "pod, $alloc: ${line#RESULT }"; fi
    case $alloc in
      default) echo "TABLE agent=own-ipc(manifest) memory=cuda-ipc ${line#RESULT * }" ;;
      pool) echo "TABLE agent=own-ipc(manifest) memory=vmm-fd ${line#RESULT * }" ;;
    esac
  done
else fail "agent (manifest namespaces) did not start: $(cat "$WORK/manifest.log")"; fi

# What each handle kind needs of the agent's namespaces (docs/agent.md's table).
for row in ${POD_TABLE_ROWS-host: own-pid:--pid}; do
  name=${row%%:*}; flags=${row#*:}
  [[ $flags == *--pid* ]] && flags="$flags --mount-proc"
  # shellcheck disable=SC2086
  if ! start_agent "t-$name" --mount $flags; then echo "TABLE $name agent-did-not-start"; continue; fi
  for alloc in ${POD_TABLE_MEMORY:-default pool}; do
    line=$(pod "$WORK/t-$name/agent.sock" "$alloc")
    kind=cuda-ipc; [[ $alloc == pool ]] && kind=vmm-fd
    echo "TABLE agent=$name memory=$kind ${line#RESULT $alloc }"
  done
done

echo
if ((FAILED == 0)); then echo "POD VIEW PASSED"; else echo "POD VIEW FAILED: $FAILED"; fi
exit $((FAILED > 0))
