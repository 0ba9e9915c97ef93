#!/usr/bin/env bash
# check_layers.sh must catch each kind of upward include: every one is planted in one copy of
# the tree and each must be named; the allowed ones (a transport's settings from ops), planted in
# another copy, must pass. Three runs of the check in all (one per plant took a minute on an idle
# machine and timed out under load); the rules judge each include alone, so planting them
# together tests each as planting it alone would.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CHECK="$SRC/tests/layout/check_layers.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/clean"
cp -r "$SRC/daemon" "$SRC/client" "$SRC/common" "$SRC/agent" "$work/clean/"
cp -r "$work/clean" "$work/refused"
cp -r "$work/clean" "$work/allowed"

bash "$CHECK" "$work/clean" >/dev/null || { echo "FAIL: the unchanged tree does not pass"; exit 1; }
refused=()
allowed=()
# expect FILE INCLUDE 0|1: plant `#include "INCLUDE"` at the end of FILE in the copy that must
# pass (0) or in the one where it must be named (1).
expect() {
  local file=$1 inc=$2 want=$3
  if [[ $want == 1 ]]; then
    echo "#include \"$inc\"" >>"$work/refused/$file"
    refused+=("$file includes \"$inc\"")
  else
    echo "#include \"$inc\"" >>"$work/allowed/$file"
    allowed+=("$file -> $inc")
  fi
}
expect daemon/transport/tcp/tcp_link.cc daemon/service/store_service.h 1
expect daemon/transport/transport_set.cc daemon/ops/daemon_config.h 1
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
expect daemon/transport/transport_set.cc daemon/observe/stats.h 1
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
expect common/process/service_main.h common/wire/stream_limits.h 1
expect common/process/service_main.h common/base/units.h 0
expect agent/upstream.cc client/src/registration.h 1
expect agent/upstream.cc gdrstore/client.h 0
expect client/src/client.cc agent/upstream.h 1

# A file at the top of daemon/ other than main.cc, and one loose at the top of common/.
echo '// stray' >"$work/refused/daemon/stray.cc"
refused+=("daemon/stray.cc: only main.cc")
echo '// stray' >"$work/refused/common/stray.h"
refused+=("common/stray.h: common/ keeps every file")

fails=0
rc=0
out=$(bash "$CHECK" "$work/allowed" 2>&1) || rc=$?
if ((rc != 0)); then
  echo "FAIL: allowed includes were refused (rc $rc): $out"; fails=$((fails + 1))
else
  printf 'ok: %s allowed\n' "${allowed[@]}"
fi
rc=0
out=$(bash "$CHECK" "$work/refused" 2>&1) || rc=$?
if ((rc == 0)); then echo "FAIL: the tree with upward includes passed: $out"; fails=$((fails + 1)); fi
for want in "${refused[@]}"; do
  if [[ $out == *"$want"* ]]; then
    echo "ok: $want: refused"
  else
    echo "FAIL: not reported: $want"; fails=$((fails + 1))
  fi
done
((fails == 0)) || echo "the check said: $out"
echo "$((${#refused[@]} + ${#allowed[@]})) checks, $fails failed"
((fails == 0))
