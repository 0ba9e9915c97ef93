#!/usr/bin/env bash
# The first-run kit for two RDMA hosts: a storage host running gdrstored and a client host running
# gdrctl (this script runs on the client host and reaches the storage host over ssh; --local runs
# both ends here, as in the SoftRoCE guest). It writes ONE report file for a bug report:
#   1. environment of each host (kernel, distro, rdma-core, drivers, firmware, ibv_devinfo,
#      nvidia-smi), 2. gdrctl doctor on each host, 3. gdrctl selftest for rc and dc, 4. perftest
#      (ib_write_bw / ib_read_bw, --use_cuda when a GPU is used) beside gdrctl bench on the same
#      device and sizes, 5. a results table with the ratio gdrctl/perftest per size, 6. every
#      command with its output.
# dc on a device without it (not mlx5, no DC firmware) is reported as unsupported with the reason.
# Exit: 0 the kit ran and everything the devices support passed; 1 something supported failed;
# 2 bad usage or missing tools.
#
#   scripts/hw-first-run.sh --storage-host HOST --rdma-device mlx5_0 [--gpu 0] [options]
#   scripts/hw-first-run.sh --local --rdma-device rxe0 --addr 10.11.0.1
#
# Options:
#   --storage-host HOST      ssh destination of the storage host (user@host); its binaries are
#                            gdrstored/gdrctl on PATH unless --remote-bin-dir DIR
#   --local                  both ends on this host (one device, loopback through the NIC)
#   --rdma-device DEV        this host's RDMA device (default: the first in /sys/class/infiniband)
#   --storage-device DEV     the storage host's device (default: --rdma-device)
#   --addr IP                this host's RoCE address (default: DEV's RoCE v2 IPv4 GID)
#   --storage-addr IP        the storage host's RoCE address (default: its device's GID; --local: --addr)
#   --daemon HOST:PORT       use a gdrstored already running there instead of starting one
#   --gpu N                  client buffers (gdrctl --gpu, perftest --use_cuda) on GPU N
#   --sizes "64KiB 1MiB 16MiB"   op sizes to measure      --iters N   ops per measurement (500)
#   --qd N                   gdrctl bench ops in flight (16)
#   --volume-size SIZE       the daemon's volume when the kit starts it (1GiB)
#   --bin-dir DIR            where this host's gdrstored/gdrctl are: a build tree or a bin dir
#   --out FILE               the report (default ./gdrstored-first-run-HOST-DATE.md)
set -uo pipefail

LOCAL=0 STORAGE_HOST="" DEV="" STORAGE_DEV="" ADDR="" STORAGE_ADDR="" DAEMON="" GPU=""
SIZES="64KiB 1MiB 16MiB" ITERS=500 QD=16 BIN_DIR="" REMOTE_BIN="" OUT="" VOLUME=1GiB
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while (($#)); do
  case $1 in
    --local) LOCAL=1 ;;
    --storage-host) STORAGE_HOST=$2; shift ;;
    --rdma-device) DEV=$2; shift ;;
    --storage-device) STORAGE_DEV=$2; shift ;;
    --addr) ADDR=$2; shift ;;
    --storage-addr) STORAGE_ADDR=$2; shift ;;
    --daemon) DAEMON=$2; shift ;;
    --gpu) GPU=$2; shift ;;
    --sizes) SIZES=$2; shift ;;
    --iters) ITERS=$2; shift ;;
    --qd) QD=$2; shift ;;
    --bin-dir) BIN_DIR=$2; shift ;;
    --remote-bin-dir) REMOTE_BIN=$2; shift ;;
    --out) OUT=$2; shift ;;
    --volume-size) VOLUME=$2; shift ;;
    -h|--help) usage ;;
    *) echo "hw-first-run: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ((LOCAL == 0)) && [[ -z $STORAGE_HOST ]]; then
  echo "hw-first-run: give --storage-host HOST, or --local for both ends on this host" >&2
  exit 2
fi

# This host's binaries: a build tree (build/daemon, build/client) or one directory.
find_bin() {
  local name=$1 d
  for d in "$BIN_DIR" "$BIN_DIR/daemon" "$BIN_DIR/client"; do
    [[ -n $BIN_DIR && -x $d/$name ]] && { echo "$d/$name"; return; }
  done
  command -v "$name" || true
}
GDRSTORED=$(find_bin gdrstored)
GDRCTL=$(find_bin gdrctl)
for tool in "$GDRCTL" ib_write_bw ib_read_bw; do
  command -v "$tool" >/dev/null 2>&1 || { echo "hw-first-run: '$tool' not found (gdrctl: --bin-dir; perftest: install the perftest package)" >&2; exit 2; }
done
if [[ -z $DAEMON ]] && ((LOCAL)) && [[ ! -x $GDRSTORED ]]; then
  echo "hw-first-run: gdrstored not found (--bin-dir)" >&2; exit 2
fi
[[ -n $DEV ]] || DEV=$(ls /sys/class/infiniband 2>/dev/null | head -n1)
[[ -n $DEV ]] || { echo "hw-first-run: no RDMA device on this host" >&2; exit 2; }
[[ -n $STORAGE_DEV ]] || STORAGE_DEV=$DEV

WORK=$(mktemp -d /tmp/gdr-first-run.XXXXXX)
CMDLOG=$WORK/commands.md
DAEMON_PID="" REMOTE_PID="" SERVER_PID=""
cleanup() {
  [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null
  [[ -n $DAEMON_PID ]] && { kill -TERM "$DAEMON_PID" 2>/dev/null; wait "$DAEMON_PID" 2>/dev/null; }
  [[ -n $REMOTE_PID ]] && on_storage "kill -TERM $REMOTE_PID" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# on_storage CMD: CMD on the storage host (here with --local), through a login-free shell.
on_storage() {
  if ((LOCAL)); then bash -c "$1"; else ssh -o BatchMode=yes "$STORAGE_HOST" "$1"; fi
}
# run WHERE CMD...: runs and logs one command (WHERE: client or storage); its output is on
# stdout too. Returns the command's status.
run() {
  local where=$1; shift
  local cmd="$*" out rc
  if [[ $where == storage ]]; then out=$(on_storage "$cmd" 2>&1); else out=$(bash -c "$cmd" 2>&1); fi
  rc=$?
  { printf '\n```\n[%s]$ %s   (exit %d)\n' "$where" "$cmd" "$rc"; printf '%s\n' "$out"; printf '```\n'; } >> "$CMDLOG"
  printf '%s\n' "$out"
  return $rc
}

# The RoCE v2 IPv4 GID of DEV port 1 as "INDEX IP": the entry holding WANT when given, else the
# first. Defined here, run on either host (sent to the storage host as text).
roce_gid() {
  local dev=$1 want=${2:-} f i g t h ip
  for f in /sys/class/infiniband/$dev/ports/1/gids/*; do
    i=${f##*/}
    g=$(cat "$f" 2>/dev/null) || continue
    t=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$i" 2>/dev/null) || continue
    [[ $t == "RoCE v2" && $g == 0000:0000:0000:0000:0000:ffff:* ]] || continue
    h=${g:30:4}${g:35:4}
    ip=$((16#${h:0:2})).$((16#${h:2:2})).$((16#${h:4:2})).$((16#${h:6:2}))
    [[ -z $want || $ip == "$want" ]] && { echo "$i $ip"; return 0; }
  done
  return 1
}
gid_of() {  # WHERE DEV [IP]
  local script
  script="$(declare -f roce_gid); roce_gid $2 ${3:-}"
  if [[ $1 == storage ]]; then on_storage "$script"; else bash -c "$script"; fi
}

# No process substitution: the SoftRoCE guest has no /dev/fd.
GID_IDX="" ADDR_FOUND="" S_GID_IDX="" S_ADDR_FOUND=""
read -r GID_IDX ADDR_FOUND <<< "$(gid_of client "$DEV" "$ADDR")"
ADDR=${ADDR:-$ADDR_FOUND}
if ((LOCAL)); then
  STORAGE_ADDR=${STORAGE_ADDR:-$ADDR} S_GID_IDX=$GID_IDX
else
  read -r S_GID_IDX S_ADDR_FOUND <<< "$(gid_of storage "$STORAGE_DEV" "$STORAGE_ADDR")"
  STORAGE_ADDR=${STORAGE_ADDR:-$S_ADDR_FOUND}
fi
if [[ -z $ADDR_FOUND || -z $S_GID_IDX || -z $STORAGE_ADDR ]]; then
  echo "hw-first-run: no RoCE v2 IPv4 GID for client $DEV ${ADDR:-?} or storage $STORAGE_DEV" \
    "${STORAGE_ADDR:-?} (give --addr/--storage-addr; gdrctl doctor says what is missing)" >&2
  exit 2
fi
RS_GDRSTORED=gdrstored RS_GDRCTL=gdrctl
if ((LOCAL)); then RS_GDRSTORED=$GDRSTORED RS_GDRCTL=$GDRCTL
elif [[ -n $REMOTE_BIN ]]; then RS_GDRSTORED=$REMOTE_BIN/gdrstored RS_GDRCTL=$REMOTE_BIN/gdrctl; fi
HOST=$(hostname)
[[ -n $OUT ]] || OUT=gdrstored-first-run-$HOST-$(date +%Y%m%d-%H%M%S).md
: > "$CMDLOG"
echo "hw-first-run: client $HOST $DEV $ADDR (GID $GID_IDX); storage ${STORAGE_HOST:-this host} $STORAGE_DEV $STORAGE_ADDR (GID $S_GID_IDX)" >&2

# ---- 1. environment ---------------------------------------------------------------------------
env_script=$(cat <<'EOF'
echo "host: $(hostname)"
echo "kernel: $(uname -srvm)"
. /etc/os-release 2>/dev/null && echo "distro: $PRETTY_NAME"
v=$(dpkg-query -W -f='${Version}' rdma-core 2>/dev/null || rpm -q --qf '%{VERSION}' rdma-core 2>/dev/null)
echo "rdma-core: ${v:-unknown}"
v=$(dpkg-query -W -f='${Version}' perftest 2>/dev/null || rpm -q --qf '%{VERSION}' perftest 2>/dev/null)
echo "perftest: ${v:-unknown}"
ofed_info -s 2>/dev/null | sed 's/^/MOFED: /'
for d in /sys/class/infiniband/*; do
  [[ -e $d ]] || { echo "RDMA devices: none"; break; }
  n=${d##*/}
  drv=$(basename "$(readlink -f "$d/device/driver" 2>/dev/null)" 2>/dev/null)
  mod=$(cat "/sys/module/${drv:-none}/version" 2>/dev/null)
  echo "device $n: driver ${drv:-none}${mod:+ $mod}, fw $(cat "$d/fw_ver" 2>/dev/null), hca $(cat "$d/hca_type" 2>/dev/null), board $(cat "$d/board_id" 2>/dev/null), pci $(basename "$(readlink -f "$d/device")")"
done
ibv_devinfo 2>&1 | grep -E "hca_id|transport|fw_ver|vendor_part_id|board_id|phys_port_cnt|port:|state|max_mtu|active_mtu|link_layer"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m 2>/dev/null
else
  echo "nvidia-smi: not installed"
fi
cat /proc/driver/nvidia/version 2>/dev/null | head -n1
EOF
)
ENV_CLIENT=$(run client "$env_script")
if ((LOCAL)); then ENV_STORAGE="(same host: --local)"; else ENV_STORAGE=$(run storage "$env_script"); fi
ENV_CLIENT+=$'\n'"gdrctl: $("$GDRCTL" --version 2>&1)"

# ---- the daemon -------------------------------------------------------------------------------
PORT=50051
if [[ -z $DAEMON ]]; then
  if ((LOCAL)); then
    "$GDRSTORED" --listen 127.0.0.1:0 --port-file "$WORK/port" --rdma-device "$DEV" \
      --volume vol0=$VOLUME --log-level warning > "$WORK/gdrstored.log" 2>&1 &
    DAEMON_PID=$!
    for _ in $(seq 1200); do   # start-up poll, 120 s at most (volumes are filled first)
      [[ -s $WORK/port ]] && break
      kill -0 "$DAEMON_PID" 2>/dev/null || break
      sleep 0.1
    done
    [[ -s $WORK/port ]] || { echo "hw-first-run: gdrstored did not start:"; cat "$WORK/gdrstored.log"; } >&2
    DAEMON=127.0.0.1:$(cat "$WORK/port" 2>/dev/null)
    printf '\n```\n[client]$ %s   (started, pid %s)\n```\n' \
      "$GDRSTORED --listen 127.0.0.1:0 --rdma-device $DEV --volume vol0=$VOLUME" "$DAEMON_PID" >> "$CMDLOG"
  else
    # A lab pair on its own link: --insecure says so (a non-loopback listen address needs TLS,
    # tokens or this flag).
    REMOTE_PID=$(run storage "f=\$(mktemp /tmp/gdrstored-first-run.XXXXXX); nohup $RS_GDRSTORED --listen $STORAGE_ADDR:$PORT --insecure --rdma-addr $STORAGE_ADDR --volume vol0=$VOLUME --log-level warning > \$f.log 2>&1 < /dev/null & echo \$!" | tail -n1)
    DAEMON=$STORAGE_ADDR:$PORT
    for _ in $(seq 120); do "$GDRCTL" --daemon "$DAEMON" info >/dev/null 2>&1 && break; sleep 1; done
  fi
fi
run client "$GDRCTL --daemon $DAEMON info" > "$WORK/info.txt"

# ---- 2. doctor --------------------------------------------------------------------------------
DOCTOR_CLIENT=$(run client "$GDRCTL --daemon $DAEMON --rdma-device $DEV doctor")
DOCTOR_STORAGE=$(run storage "$RS_GDRCTL --daemon $DAEMON --rdma-device $STORAGE_DEV doctor --role storage")
DC_LINE=$(printf '%s\n' "$DOCTOR_CLIENT" | grep -E "^[A-Z]{4} rdma\.dc +$DEV:" | head -n1)
DC_OK=0
[[ $DC_LINE == PASS* ]] && DC_OK=1
DC_WHY=$(printf '%s' "$DC_LINE" | sed -E "s/^[A-Z]{4} rdma\.dc +$DEV: //")

# ---- 3. selftest ------------------------------------------------------------------------------
FAILED=0
declare -A SELFTEST
for t in rc dc; do
  out=$(run client "$GDRCTL --daemon $DAEMON --transport $t --rdma-device $DEV selftest")
  rc=$?
  if ((rc == 0)); then SELFTEST[$t]="PASSED"
  elif [[ $t == dc && $DC_OK == 0 ]]; then SELFTEST[$t]="unsupported by $DEV: ${DC_WHY:-see doctor}"
  else
    why=$(printf '%s\n' "$out" | grep -m1 '^FAIL')
    SELFTEST[$t]="FAILED (${why:-$(printf '%s\n' "$out" | tail -n1)})"
    FAILED=1
  fi
done

# ---- 4. bandwidth: perftest beside gdrctl bench -----------------------------------------------
# gdrctl write = the daemon RDMA-WRITEs store bytes into client memory; gdrctl read = it
# RDMA-READs client memory. perftest's equivalent: its server (passive side, the buffer, with
# --use_cuda) on the client host and its client (the initiator) on the storage host.
CUDA_OPT="" GPU_OPT="" MEM="host memory"
if [[ -n $GPU ]]; then
  GPU_OPT="--gpu $GPU" MEM="GPU $GPU memory"
  if ib_write_bw --help 2>&1 | grep -q -- --use_cuda; then CUDA_OPT="--use_cuda=$GPU"
  else MEM="GPU $GPU memory (perftest built without CUDA: its side uses host memory)"; fi
fi
to_bytes() {  # 4096, 64KiB, 1MiB, 2GiB -> bytes
  [[ $1 =~ ^([0-9]+)(KiB|MiB|GiB)?$ ]] || return 1
  case ${BASH_REMATCH[2]} in
    KiB) echo $((BASH_REMATCH[1] << 10)) ;; MiB) echo $((BASH_REMATCH[1] << 20)) ;;
    GiB) echo $((BASH_REMATCH[1] << 30)) ;; *) echo "${BASH_REMATCH[1]}" ;;
  esac
}
perftest() {  # TOOL BYTES PORT -> GB/s (1e9 bytes/s) or empty
  # A run that prints no rate or 0.00 (perftest's clock misread on a busy or emulated host) is no
  # measurement: it is run once more on another port, and both runs stay in the log.
  local tool=$1 bytes=$2 port=$3 gbs
  gbs=$(perftest_once "$tool" "$bytes" "$port")
  if ! awk -v g="${gbs:-0}" 'BEGIN { exit !(g > 0) }'; then
    echo "hw-first-run: $tool -s $bytes measured ${gbs:-nothing}; measuring again" >&2
    gbs=$(perftest_once "$tool" "$bytes" $((port + 1000)))
  fi
  printf '%s' "$gbs"
}
perftest_once() {  # TOOL BYTES PORT -> GB/s (1e9 bytes/s) or empty
  local tool=$1 bytes=$2 port=$3 avg out
  "$tool" -d "$DEV" -x "$GID_IDX" -s "$bytes" -n "$ITERS" -F --report_gbits -p "$port" $CUDA_OPT \
    > "$WORK/$tool.server" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 300); do ss -ltn 2>/dev/null | grep -q ":$port " && break; sleep 0.1; done
  out=$(run storage "$tool -d $STORAGE_DEV -x $S_GID_IDX -s $bytes -n $ITERS -F --report_gbits -p $port $ADDR")
  wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""
  { printf '\n```\n[client]$ %s   (perftest server)\n' "$tool -d $DEV -x $GID_IDX -s $bytes -n $ITERS -F --report_gbits -p $port $CUDA_OPT"
    cat "$WORK/$tool.server"; printf '```\n'; } >> "$CMDLOG"
  avg=$(printf '%s\n' "$out" | awk -v s="$bytes" '$1 == s {print $4; exit}')
  [[ -n $avg ]] && awk -v g="$avg" 'BEGIN {printf "%.3f", g / 8}'
}
gdrctl_bench() {  # TRANSPORT TYPE SIZE -> GB/s or empty
  run client "$GDRCTL --daemon $DAEMON --transport $1 --rdma-device $DEV --json bench -t $2 -s $3 -n $ITERS --qd $QD -q $GPU_OPT" |
    sed -n 's/.*"gbps":\([0-9.]*\).*/\1/p' | awk '{printf "%.3f", $1}'
}
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b }'; }
TABLE="| op | size | perftest GB/s | gdrctl rc GB/s | ratio rc/perftest | gdrctl dc GB/s | ratio dc/perftest |
|---|---|---|---|---|---|---|"
RATIOS=""
port=18515
for size in $SIZES; do
  bytes=$(to_bytes "$size") || { echo "hw-first-run: bad size '$size'" >&2; exit 2; }
  for op in write read; do
    pt=$(perftest "ib_${op}_bw" "$bytes" "$port"); port=$((port + 1))
    rc_gbs=$(gdrctl_bench rc "$op" "$size")
    [[ -n $rc_gbs ]] || FAILED=1
    if ((DC_OK)); then dc_gbs=$(gdrctl_bench dc "$op" "$size"); [[ -n $dc_gbs ]] || FAILED=1
    else dc_gbs="unsupported"; fi
    r_rc=$(ratio "$rc_gbs" "$pt")
    r_dc=$( ((DC_OK)) && ratio "$dc_gbs" "$pt")
    TABLE+=$'\n'"| $op | $size | ${pt:-failed} | ${rc_gbs:-failed} | ${r_rc:--} | $dc_gbs | ${r_dc:--} |"
    RATIOS+="ratio gdrctl/perftest $op $size rc ${r_rc:-n/a}${r_dc:+ dc $r_dc}"$'\n'
  done
done

# ---- the report -------------------------------------------------------------------------------
{
  echo "# gdrstored first-run report"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $(basename "$0") $([[ $LOCAL == 1 ]] && echo --local)"
  echo "client host $HOST, device $DEV, $ADDR (GID $GID_IDX); storage host ${STORAGE_HOST:-this host (--local)}, device $STORAGE_DEV, $STORAGE_ADDR (GID $S_GID_IDX); daemon $DAEMON"
  echo "buffers: $MEM; $ITERS ops per measurement, gdrctl qd $QD, perftest defaults (1 QP)"
  echo
  echo "## Results"
  echo
  echo "selftest rc: ${SELFTEST[rc]}"
  echo "selftest dc: ${SELFTEST[dc]}"
  ((DC_OK)) || echo "dc: unsupported by $DEV: ${DC_WHY:-not probed}"
  echo
  echo "$TABLE"
  echo
  printf '%s' "$RATIOS"
  echo
  echo "## Environment"
  echo
  echo "### client host"; echo '```'; echo "$ENV_CLIENT"; echo '```'
  echo "### storage host"; echo '```'; echo "$ENV_STORAGE"; echo '```'
  echo
  echo "## Doctor"
  echo
  echo "### client host"; echo '```'; echo "$DOCTOR_CLIENT"; echo '```'
  echo "### storage host"; echo '```'; echo "$DOCTOR_STORAGE"; echo '```'
  echo
  echo "## Commands and output"
  cat "$CMDLOG"
  if [[ -s $WORK/gdrstored.log ]]; then
    echo; echo "### gdrstored log"; echo '```'; tail -n 50 "$WORK/gdrstored.log"; echo '```'
  fi
} > "$OUT"
echo "hw-first-run: report in $OUT" >&2
grep -E "^selftest|^dc:|^ratio" "$OUT" >&2
exit $FAILED
