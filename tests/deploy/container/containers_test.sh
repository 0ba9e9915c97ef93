#!/usr/bin/env bash
# The image (scripts/build-image.sh) run for real under podman with runc:
# - a daemon container and an agent container sharing the daemon's network namespace (the agent
#   reaches the daemon on its loopback), and a client container with no network at all, no RDMA
#   device and no host IPC, sharing only the agent's socket volume: its bytes go through the
#   agent and are verified, and the daemon container drains on SIGTERM;
# - the overlays' readiness checks: rc's fails naming the absent RDMA device, tcp's passes;
# - both DaemonSets' pod templates played by `podman kube play`, their probes answering;
# - the image built again a day later (reproducible_image.sh): the same ID.
# usage: containers_test.sh BUILD_DIR        (root; exit 77 = skipped, saying why)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
B=$(cd "$1" && pwd)
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (debootstrap, podman's storage)"; exit 77; fi
source "$SRC/scripts/podman-env.sh" || { echo "SKIP: no podman/runc"; exit 77; }
command -v debootstrap > /dev/null || { echo "SKIP: no debootstrap"; exit 77; }
command -v faketime > /dev/null || { echo "SKIP: no faketime (a build a day later)"; exit 77; }

TAG=localhost/gdrstore:ctest-$$
RUN=gdrstore-ctest-$$
T=$(mktemp -d)
PLAYED=()
cleanup() {
  for p in "${PLAYED[@]}"; do podman pod rm -f "$p" > /dev/null 2>&1 || true; done
  # kube play keeps each ConfigMap as a volume of its name.
  ((${#PLAYED[@]})) && podman volume rm -f gdrstored-config gdragent-config > /dev/null 2>&1
  # The agent first: it lives in the daemon's network namespace.
  podman rm -f "$RUN-agent" > /dev/null 2>&1 || true
  podman rm -f "$RUN-daemon" > /dev/null 2>&1 || true
  podman rm -f "$RUN-client" > /dev/null 2>&1 || true
  podman volume rm -f "$RUN-sock" > /dev/null 2>&1 || true
  podman rmi -f "$TAG" > /dev/null 2>&1 || true
  # build-image.sh leaves its root file system tar (for reuse) in a directory it names.
  local root
  root=$(sed -n 's/^build-image: root file system //p' "$T/build.log" 2>/dev/null || true)
  [[ -n $root ]] && rm -rf "$(dirname "$root")"
  rm -rf "$T"
}
trap cleanup EXIT

# Waits up to 60 s for a container's log to show PATTERN.
wait_log() {
  for _ in $(seq 300); do
    podman logs "$1" 2>&1 | grep -q "$2" && return 0
    sleep 0.2
  done
  echo "FAIL: $1 did not log '$2' within 60 s"; podman logs "$1" 2>&1 | tail -5
  return 1
}

# The .debs are kept for the second build: a rebuild of the tree meanwhile must not change them.
GDR_IMAGE_DEBS=$T/debs bash "$SRC/scripts/build-image.sh" "$B" "$TAG" | tee "$T/build.log"
grep -q "^image id: sha256:[0-9a-f]\{64\}$" "$T/build.log"

cat > "$T/gdrstored.conf" <<'CONF'
listen = "127.0.0.1:50051"
volume = ["vol0=64MiB"]
drain-timeout-ms = 10000
CONF
cat > "$T/gdragent.conf" <<'CONF'
socket = /run/gdragent/agent.sock
socket-mode = 0666
allow-uid = [1000]
daemon = [127.0.0.1:50051]
transport = tcp
CONF
chmod 0644 "$T"/*.conf
podman volume create "$RUN-sock" > /dev/null
podman run -d --name "$RUN-daemon" --cap-drop ALL --cap-add IPC_LOCK \
  --read-only -v "$T/gdrstored.conf:/etc/gdrstored/gdrstored.conf:ro" "$TAG" > /dev/null
wait_log "$RUN-daemon" "serving gdrstore.v1"
# The volume's directory is made by podman as root: the agent (uid 10001) needs it writable.
podman run --rm -v "$RUN-sock:/run/gdragent" --user 0 --entrypoint /usr/bin/chown "$TAG" \
  10001:10001 /run/gdragent
podman run -d --network "container:$RUN-daemon" --name "$RUN-agent" --cap-drop ALL --cap-add IPC_LOCK --read-only \
  -v "$T/gdragent.conf:/etc/gdragent/gdragent.conf:ro" -v "$RUN-sock:/run/gdragent" \
  --entrypoint /usr/sbin/gdragent "$TAG" --config /etc/gdragent/gdragent.conf > /dev/null
wait_log "$RUN-agent" "serving /run/gdragent/agent.sock"

client() {
  podman run --rm --name "$RUN-client" --network none --cap-drop ALL --read-only --user 1000:1000 \
    -v "$RUN-sock:/run/gdragent" --entrypoint /usr/bin/gdrctl "$TAG" \
    --agent /run/gdragent/agent.sock "$@"
}
status=0
# read = buffer -> store (a put of salt 9's pattern), write = store -> buffer, verified.
client read -o 1MiB -s 8MiB --salt 9 > "$T/put" 2>&1 || { echo "FAIL: put"; cat "$T/put"; status=1; }
if ! client write -o 1MiB -s 8MiB --salt 9 --verify > "$T/get" 2>&1 || ! grep -q verified "$T/get"; then
  echo "FAIL: verified get through the agent"; cat "$T/get"; status=1
fi
if client write -o 1MiB -s 8MiB --salt 3 --verify > "$T/wrong" 2>&1; then
  echo "FAIL: a get verified against the wrong pattern passed"; status=1
fi
cat "$T/get"

podman stop -t 30 "$RUN-daemon" > /dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$RUN-daemon")
podman logs "$RUN-daemon" > "$T/daemon.log" 2>&1
if [[ $code != 0 ]] || ! grep -q "SIGTERM: draining" "$T/daemon.log" ||
   ! grep -q "stopped cleanly" "$T/daemon.log"; then
  echo "FAIL: daemon container on SIGTERM: exit $code"; tail -5 "$T/daemon.log"; status=1
fi
grep -h "SIGTERM: draining\|stopped cleanly" "$T/daemon.log"
podman rm -f "$RUN-agent" > /dev/null 2>&1 || true

# The readiness check as the overlays define it: the rc overlay's (--needs rdma) stops the pod
# on this host, naming the missing RDMA device; the tcp overlay's passes.
BUILD_DIR=$B
source "$SRC/tests/deploy/kubernetes/tools.sh"
K8S=$SRC/tests/deploy/kubernetes
for o in tcp rc; do "$KUSTOMIZE" build "$SRC/deploy/kubernetes/overlays/$o" > "$T/$o.yaml"; done
mapfile -t rc_check < <(node "$K8S/init_command.js" "$T/rc.yaml" gdrstored)
if podman run --rm --entrypoint "${rc_check[0]}" "$TAG" "${rc_check[@]:1}" > "$T/rc-check" 2>&1 ||
   ! grep -q '"check":"rdma.devices","subject":"","status":"FAIL"' "$T/rc-check"; then
  echo "FAIL: the rc readiness check did not fail naming rdma.devices"; tail -c 600 "$T/rc-check"
  status=1
fi
mapfile -t tcp_check < <(node "$K8S/init_command.js" "$T/tcp.yaml" gdrstored)
podman run --rm --entrypoint "${tcp_check[0]}" "$TAG" "${tcp_check[@]:1}" > "$T/tcp-check" 2>&1 ||
  { echo "FAIL: the tcp readiness check failed"; tail -c 600 "$T/tcp-check"; status=1; }

# Both DaemonSets' pod templates played by podman (a Deployment each: kube_play_form.js), the
# Secret gdrstore-tokens given as files: the daemon's gRPC health answers SERVING, the agent's
# probe command (a round trip through it to the daemon) succeeds, and SIGTERM drains both.
mkdir -p "$T/play/_var_lib_gdrstored" "$T/play/_run_gdragent" "$T/play/secret_gdrstore-tokens" \
  "$T/play/secret_gdrstore-agent-token"
echo "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n') name=operator admin=yes" \
  > "$T/play/secret_gdrstore-tokens/tokens"
# The agent's own Secret: here the same token, which the played daemon admits.
cp "$T/play/secret_gdrstore-tokens/tokens" "$T/play/secret_gdrstore-agent-token/tokens"
chmod 0400 "$T/play/secret_gdrstore-tokens/tokens" "$T/play/secret_gdrstore-agent-token/tokens"
chown -R 10001:10001 "$T/play"
# The socket directory as kubelet makes it (root, 0755): the agent pod's socket-dir step must
# hand it to the agent, or the agent cannot serve.
chown 0:0 "$T/play/_run_gdragent" && chmod 0755 "$T/play/_run_gdragent"
node "$K8S/kube_play_form.js" "$T/tcp.yaml" gdrstored "$T/play" "$TAG" > "$T/play-daemon.yaml"
podman kube play "$T/play-daemon.yaml" > /dev/null
PLAYED+=(gdrstored-pod-0)
wait_log gdrstored-pod-0-gdrstored "serving gdrstore.v1"
DPID=$(podman inspect --format '{{.State.Pid}}' gdrstored-pod-0-gdrstored)
DIP=$(podman inspect --format '{{.NetworkSettings.IPAddress}}' gdrstored-pod-0-infra 2>/dev/null || true)
[[ -n $DIP ]] || DIP=$(nsenter -t "$DPID" -n ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
if ! nsenter -t "$DPID" -n /usr/bin/python3 -c "
import grpc, sys
r = grpc.insecure_channel('127.0.0.1:50051').unary_unary('/grpc.health.v1.Health/Check')(b'', timeout=10)
sys.exit(0 if r == b'\x08\x01' else 1)"; then
  echo "FAIL: the played daemon's gRPC health is not SERVING"; podman logs gdrstored-pod-0-gdrstored | tail -5
  status=1
fi
node "$K8S/kube_play_form.js" "$T/tcp.yaml" gdragent "$T/play" "$TAG" \
  "gdrstored.gdrstore.svc.cluster.local:50051=$DIP:50051" > "$T/play-agent.yaml"
podman kube play "$T/play-agent.yaml" > /dev/null
PLAYED+=(gdragent-pod-0)
wait_log gdragent-pod-0-gdragent "serving /run/gdragent/agent.sock"
if ! podman healthcheck run gdragent-pod-0-gdragent > "$T/agent-probe" 2>&1; then
  echo "FAIL: the played agent's probe did not pass"; cat "$T/agent-probe"
  podman logs gdragent-pod-0-gdragent 2>&1 | tail -5; status=1
fi
for p in gdragent gdrstored; do
  podman pod stop -t 30 "$p-pod-0" > /dev/null
  if ! podman logs "$p-pod-0-$p" 2>&1 | grep -q "stopped cleanly"; then
    echo "FAIL: the played $p did not stop cleanly"; status=1
  fi
done

bash "$SRC/tests/deploy/container/reproducible_image.sh" "$B" "$TAG" "$T/debs" "$T/build.log" ||
  status=1

((status == 0)) && echo "containers: verified bytes through the agent's socket volume; the daemon drained on SIGTERM; readiness checks named; both DaemonSets' pods played, probes answering;" \
  "rebuilt a day later, the same image"
exit $status
