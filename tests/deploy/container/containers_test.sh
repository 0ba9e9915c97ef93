#!/usr/bin/env bash
# The image (scripts/build-image.sh) run for real under podman with runc: a daemon container and
# an agent container sharing the daemon's network namespace (a network of their own; the agent
# reaches the daemon on its loopback), and a client container with no network at all, no RDMA device and no
# host IPC, that shares only the agent's socket volume. The client's bytes go through the agent
# and are verified; the daemon container stops cleanly on SIGTERM with its drain log line.
# usage: containers_test.sh BUILD_DIR        (root; exit 77 = skipped, saying why)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
B=$(cd "$1" && pwd)
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (debootstrap, podman's storage)"; exit 77; fi
source "$SRC/scripts/podman-env.sh" || { echo "SKIP: no podman/runc"; exit 77; }
command -v debootstrap > /dev/null || { echo "SKIP: no debootstrap"; exit 77; }

TAG=localhost/gdrstore:ctest-$$
RUN=gdrstore-ctest-$$
T=$(mktemp -d)
cleanup() {
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

bash "$SRC/scripts/build-image.sh" "$B" "$TAG" | tee "$T/build.log"
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
for _ in $(seq 150); do
  podman logs "$RUN-daemon" 2>&1 | grep -q "serving on" && break
  sleep 0.2
done
# The volume's directory is made by podman as root: the agent (uid 10001) needs it writable.
podman run --rm -v "$RUN-sock:/run/gdragent" --user 0 --entrypoint /usr/bin/chown "$TAG" \
  10001:10001 /run/gdragent
podman run -d --network "container:$RUN-daemon" --name "$RUN-agent" --cap-drop ALL --cap-add IPC_LOCK --read-only \
  -v "$T/gdragent.conf:/etc/gdragent/gdragent.conf:ro" -v "$RUN-sock:/run/gdragent" \
  --entrypoint /usr/sbin/gdragent "$TAG" --config /etc/gdragent/gdragent.conf > /dev/null
for _ in $(seq 150); do
  podman logs "$RUN-agent" 2>&1 | grep -q "serving /run/gdragent/agent.sock" && break
  sleep 0.2
done

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
((status == 0)) && echo "containers: verified bytes through the agent's socket volume; the daemon drained on SIGTERM"
exit $status
