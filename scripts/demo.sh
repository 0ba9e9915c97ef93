#!/usr/bin/env bash
# The main job on one machine: start gdrstored on 127.0.0.1 (ephemeral port, tcp transport),
# move verified bytes both ways with gdrctl, run a short bench, stop the daemon with SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
GDRSTORED=$BUILD_DIR/daemon/gdrstored
GDRCTL=$BUILD_DIR/client/gdrctl
work=$(mktemp -d)
daemon_pid=""
cleanup() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then kill -TERM "$daemon_pid"; wait "$daemon_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$GDRSTORED" --listen 127.0.0.1:0 --port-file "$work/port" --volume vol0=512MiB --volume scratch=64MiB \
  2> "$work/gdrstored.log" &
daemon_pid=$!
for _ in $(seq 200); do
  [[ -s $work/port ]] && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/gdrstored.log"; exit 1; }
  sleep 0.05
done
port=$(cat "$work/port")
ctl() { echo "+ gdrctl $*"; "$GDRCTL" -a 127.0.0.1 -p "$port" "$@"; }

ctl info
ctl write --volume vol0 -o 4097 -s 1MiB --verify
ctl read --volume vol0 -o 12345 -s 3MiB --verify
ctl write --volume vol0 -o 12345 -s 3MiB --verify
ctl bench -t write -s 1MiB -n 512 --qd 4 -q
ctl bench -t read -s 1MiB -n 512 --qd 4 -q
ctl bench -t write -s 4KiB -n 20000 --qd 32 -q
kill -TERM "$daemon_pid"
wait "$daemon_pid"
echo "gdrstored exited $? after SIGTERM; its log:"
cat "$work/gdrstored.log"
daemon_pid=""
