#!/usr/bin/env bash
# tcp links per client: one client's load and store GB/s (gdrctl bench, host and GPU memory)
# against --tcp-max-links-per-target 2 (the old fixed share), 4, 8, 16 (the default) and 32, and
# 8 clients at once at 2 against 16, each daemon with its defaults otherwise. Runs the binaries
# that scripts/gpu-carry.sh packed (on the GPU host: bash bench/tcp_links.sh [CARRY_DIR]).
set -u
C=$(realpath "${1:-.gpu-carry}")
export LD_LIBRARY_PATH=$C/lib
B=$C/bin
nproc; nvidia-smi -L 2>/dev/null || echo "no GPU: the --gpu lines fail"
start() {
  rm -f /tmp/port
  $B/gdrstored --listen 127.0.0.1:0 --port-file /tmp/port --volume vol0=8GiB --max-op-size 256MiB "$@" > /tmp/d.log 2>&1 &
  DPID=$!
  for i in $(seq 200); do [ -s /tmp/port ] && break; sleep 0.05; done
  ADDR=127.0.0.1:$(cat /tmp/port)
}
stop() { kill $DPID; wait $DPID 2>/dev/null; }
one() { # label, bench args
  local l=$1; shift
  echo "$l $($B/gdrctl --daemon $ADDR bench -q "$@" 2>&1 | head -1)"
}
for rep in 1 2; do
  for M in 2 4 8 16 32; do
    start --tcp-max-links-per-target $M
    # gdrctl's "write" is the daemon writing into the client's memory: a load.
    one "rep$rep M=$M load-host-64MiB-qd2" -t write -s 64MiB -n 64 --qd 2 --span 4GiB
    one "rep$rep M=$M load-gpu-64MiB-qd2 " -t write -s 64MiB -n 64 --qd 2 --span 4GiB --gpu 0
    one "rep$rep M=$M load-host-16MiB-qd4" -t write -s 16MiB -n 192 --qd 4 --span 4GiB
    one "rep$rep M=$M store-host-64MiB-qd2" -t read -s 64MiB -n 64 --qd 2 --span 4GiB
    $B/gdrctl --daemon $ADDR bench -q -t write -s 64MiB -n 160 --qd 2 --span 4GiB > /tmp/bg.out 2>&1 &
    bg=$!; sleep 0.4
    echo "rep$rep M=$M during a load: $($B/gdrctl --daemon $ADDR stats 2>&1 | grep -m1 'pool')"
    wait $bg
    stop
  done
done
# 8 clients at once, disjoint 512 MiB spans: the old share (2) against the default (16).
for rep in 1 2; do
  for M in 2 16; do
    start --tcp-max-links-per-target $M
    pids=()
    for k in 0 1 2 3 4 5 6 7; do
      $B/gdrctl --daemon $ADDR bench -q -t write -s 16MiB -n 96 --qd 2 -o $((k*512))MiB --span 512MiB > /tmp/c$k.out 2>&1 &
      pids+=($!)
    done
    wait "${pids[@]}"
    echo "rep$rep M=$M 8 clients: $(cat /tmp/c*.out | grep -o '[0-9.]* GB/s' | tr '\n' ' ')"
    stop
  done
done
