# Sourced by bench scripts: one gdrstored on a loopback port of its own, in a work directory
# that goes with it when the script exits (the daemon this started is stopped, by PID).
#   bench_daemon GDRSTORED LOG [gdrstored flags...]   -> $bench_work, $bench_port
bench_work=$(mktemp -d)
bench_pid=
bench_cleanup() {
  if [[ -n $bench_pid ]]; then
    kill -TERM "$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
  fi
  rm -rf "$bench_work"
}
trap bench_cleanup EXIT

bench_daemon() {
  local bin=$1 log=$2
  shift 2
  "$bin" --listen 127.0.0.1:0 --port-file "$bench_work/port" "$@" 2>"$log" &
  bench_pid=$!
  for _ in $(seq 300); do [[ -s $bench_work/port ]] && break; sleep 0.1; done  # 30 s at most
  [[ -s $bench_work/port ]] || { echo "bench: gdrstored did not start (see $log)" >&2; exit 1; }
  bench_port=$(cat "$bench_work/port")
}
