#!/usr/bin/env bash
# check_layers.sh must catch each kind of upward include: plant one at a time in a copy of the
# tree and expect it to be named; the allowed ones (a transport's settings from ops) must pass.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CHECK="$SRC/tests/layout/check_layers.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$SRC/daemon" "$SRC/client" "$SRC/common" "$SRC/agent" "$work/"

bash "$CHECK" "$work" >/dev/null || { echo "FAIL: the unchanged tree does not pass"; exit 1; }
fails=0
checks=0
# expect FILE INCLUDE 0|1: plant `#include "INCLUDE"` at the end of FILE, run the check.
expect() {
  local file=$1 inc=$2 want=$3 out rc
  checks=$((checks + 1))
  cp "$work/$file" "$work/$file.orig" 2>/dev/null || : >"$work/$file.orig"
  echo "#include \"$inc\"" >>"$work/$file"
  rc=0
  out=$(bash "$CHECK" "$work" 2>&1) || rc=$?
  if [[ $want == 1 && ( $rc == 0 || $out != *"$file includes \"$inc\""* ) ]]; then
    echo "FAIL: $file -> $inc was not reported (rc $rc): $out"; fails=$((fails + 1))
  elif [[ $want == 0 && $rc != 0 ]]; then
    echo "FAIL: $file -> $inc was refused: $out"; fails=$((fails + 1))
  else
    echo "ok: $file -> $inc $([[ $want == 1 ]] && echo refused || echo allowed)"
  fi
  if [[ -s $work/$file.orig ]]; then mv "$work/$file.orig" "$work/$file"; else rm -f "$work/$file" "$work/$file.orig"; fi
}
expect daemon/transport/tcp/tcp_link.cc daemon/service/store_service.h 1
expect daemon/transport/transfer_op.cc daemon/ops/daemon_config.h 1
expect daemon/store/store.cc daemon/transport/initiator.h 1
expect daemon/service/inflight_limiter.cc daemon/ops/reload.h 1
expect daemon/sim/fault_injector.cc daemon/service/store_service.h 1
expect daemon/sim/media_timing.cc daemon/ops/reload.h 1
expect daemon/observe/stats.cc daemon/service/store_service.h 1
expect daemon/observe/stats.cc daemon/ops/reload.h 1
expect daemon/sim/delay_queue.cc daemon/observe/stats.h 1
expect daemon/observe/trace_recorder.cc daemon/sim/delay_queue.h 1
expect daemon/sim/fault_injector.cc daemon/transport/tcp/tcp_initiator.h 1
expect daemon/observe/stats.cc daemon/transport/rc/rc_initiator.h 1
expect daemon/sim/fault_injector.cc daemon/transport/transfer_op.h 0
expect daemon/transport/tcp/tcp_link.cc daemon/sim/fault_injector.h 1
expect daemon/transport/transfer_op.cc daemon/observe/stats.h 1
expect daemon/store/store.cc daemon/sim/media_timing.h 1
expect daemon/store/store.cc daemon/observe/stats.h 1
expect daemon/verbs_core/verbs_core.cc daemon/sim/delay_queue.h 1
expect daemon/service/store_service.cc daemon/sim/fault_injector.h 0
expect daemon/main.cc daemon/service/store_service.h 1
expect daemon/main.cc daemon/ops/supervisor.h 0
expect daemon/ops/reload.cc daemon/transport/tcp/tcp_initiator.h 1
expect daemon/ops/reload.cc daemon/transport/tcp/tcp_options.h 0
expect daemon/ops/daemon.cc daemon/transport/rc/rc_initiator.h 1
expect daemon/ops/daemon_transports.cc daemon/transport/dc/dc_initiator.h 0
expect daemon/transport/rc/rc_connection.cc daemon/transport/tcp/tcp_link.h 1
expect daemon/transport/dc/dc_transport.cc daemon/transport/rc/rc_initiator.h 1
expect daemon/verbs_core/verbs_core.cc daemon/transport/initiator.h 1
expect daemon/store/store.cc daemon/verbs_core/verbs_core.h 1
expect daemon/transport/dc/dc_transport.cc daemon/verbs_core/verbs_core.h 0
expect daemon/transport/local/local_initiator.cc daemon/transport/tcp/tcp_link.h 1
expect daemon/transport/tcp/tcp_link.cc daemon/transport/local/local_initiator.h 1
expect daemon/ops/daemon.cc daemon/transport/local/local_initiator.h 1
expect daemon/ops/daemon_config.cc daemon/transport/local/local_options.h 0
expect daemon/sim/fault_injector.cc daemon/transport/local/local_destination.h 1
expect daemon/transport/initiator.h daemon/transport/rc/rc_initiator.h 1
expect client/src/transport/tcp/tcp_target.cc client/src/transport/rc/rc_session.h 1
expect client/src/transport/rc/rc_session.cc client/src/op_request.h 1
expect client/src/client.cc client/src/transport/tcp/tcp_target.h 1
expect client/include/gdrstore/client.h client/src/transport/region.h 1
expect client/src/transport/tcp/tcp_transport.cc gdrstore/client.h 1
expect client/src/transport/client_transport.h gdrstore/client.h 1
expect client/src/transport/rc/rc_session.cc gdrstore/types.h 0
expect common/base/log.cc daemon/store/store.h 1
expect client/src/client.cc daemon/transport/transfer_op.h 1
expect common/base/units.cc common/wire/tcp_frame.h 1
expect common/wire/tcp_frame.cc common/grpc/grpc_status.h 1
expect common/wire/tcp_frame.cc common/base/log.h 0
expect common/grpc/grpc_peer.cc common/verbs/verbs_device.h 1
expect common/verbs/gid_table.cc common/cuda/gpu.h 1
expect common/cuda/gpu_mr.cc common/verbs/memory_region.h 0
expect common/topo/numa_cpus.cc common/etcd/etcd_client.h 1
expect common/etcd/etcd_client.cc common/wire/token_file.h 1
expect common/handoff/handoff_server.cc common/etcd/etcd_client.h 1
expect common/handoff/imported_region.cc common/cuda/gpu_ipc.h 0
expect common/cuda/gpu.cc common/handoff/imported_region.h 1
expect agent/upstream.cc client/src/registration.h 1
expect agent/upstream.cc gdrstore/client.h 0
expect client/src/client.cc agent/upstream.h 1

# A file at the top of daemon/ other than main.cc.
echo '// stray' >"$work/daemon/stray.cc"
if out=$(bash "$CHECK" "$work" 2>&1) || [[ $out != *"daemon/stray.cc: only main.cc"* ]]; then
  echo "FAIL: daemon/stray.cc was not reported: $out"; fails=$((fails + 1))
else
  echo "ok: daemon/stray.cc refused"
fi
rm -f "$work/daemon/stray.cc"

# A file loose at the top of common/.
echo '// stray' >"$work/common/stray.h"
if out=$(bash "$CHECK" "$work" 2>&1) || [[ $out != *"common/stray.h: common/ keeps every file"* ]]; then
  echo "FAIL: common/stray.h was not reported: $out"; fails=$((fails + 1))
else
  echo "ok: common/stray.h refused"
fi
rm -f "$work/common/stray.h"

echo "$checks checks, $fails failed"
((fails == 0))
