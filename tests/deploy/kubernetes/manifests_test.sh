#!/usr/bin/env bash
# deploy/kubernetes rendered by kustomize (each overlay) and every object validated against the
# Kubernetes API schemas with kubernetes-models, unknown fields refused (validate.js), plus the
# promises docs/kubernetes.md makes of them; then broken copies that must be refused, so the
# check is known to fail when it should. The tools come from npm (package-lock.json), installed
# once into BUILD_DIR/k8s-tools. usage: manifests_test.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../.." && pwd)
BUILD_DIR=$(cd "$1" && pwd)
source "$HERE/tools.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
status=0
for o in tcp rc dc; do
  "$KUSTOMIZE" build "$SRC/deploy/kubernetes/overlays/$o" > "$T/$o.yaml"
  node "$HERE/validate.js" "$o" "$T/$o.yaml" || status=1
done
node "$HERE/validate.js" examples "$SRC"/deploy/kubernetes/examples/*.yaml || status=1
# What a cluster needs to admit and run them (node_prerequisites.js: Pod Security levels, the
# socket directory, priorities, tolerations, service accounts, node terms, metrics, ...); each
# rule then broken once on a copy, which must be refused naming it.
for o in tcp rc dc; do
  node "$HERE/node_prerequisites.js" check "$o" "$T/$o.yaml" \
    "$SRC/deploy/kubernetes/base/servicemonitor.yaml" || status=1
done
node "$HERE/node_prerequisites.js" examples "$SRC"/deploy/kubernetes/examples/*.yaml || status=1
node "$HERE/node_prerequisites.js" self-test "$T/tcp.yaml" "$SRC/deploy/kubernetes/examples" ||
  status=1
# The image tag is the version the tree builds (written once, in python/gdrstore/_version.py):
# kustomize cannot read it, so a release that moves one without the other fails here.
version=$(sed -n 's/^__version__ = "\([0-9.]*\)"$/\1/p' "$SRC/python/gdrstore/_version.py")
if stale=$(grep -ho 'localhost/gdrstore:[^" ]*' "$T"/{tcp,rc,dc}.yaml \
             "$SRC"/deploy/kubernetes/examples/*.yaml | sort -u |
           grep -vx "localhost/gdrstore:$version"); then
  echo "FAIL: images not tagged $version (python/gdrstore/_version.py): $stale"; status=1
fi
# The etcd example's image is what scripts/build-etcd-image.sh tags: the pinned etcd-server.
etcd=$(sed -n 's/^etcd-server=\([0-9.]*\).*/\1/p' "$SRC/scripts/etcd-image-packages.txt")
if ! grep -q "image: localhost/gdrstore-etcd:$etcd\$" "$SRC/deploy/kubernetes/examples/etcd.yaml"
then
  echo "FAIL: examples/etcd.yaml does not run localhost/gdrstore-etcd:$etcd" \
    "(scripts/etcd-image-packages.txt)"; status=1
fi

# Broken on purpose: a port that is not a number (schema), a misspelled field (which a cluster
# would drop silently, leaving the root filesystem writable), and a tcp readiness check asking
# for RDMA (policy). Each must be refused, naming what is wrong.
sed 's/containerPort: 50051/containerPort: grpc-port/' "$T/tcp.yaml" > "$T/bad-schema.yaml"
if node "$HERE/validate.js" tcp "$T/bad-schema.yaml" > "$T/out" 2>&1 ||
   ! grep -q "containerPort must be integer" "$T/out"; then
  echo "FAIL: a string containerPort was not refused"; cat "$T/out"; status=1
fi
sed '0,/readOnlyRootFilesystem:/s//readOnlyRootFileSystem:/' "$T/tcp.yaml" > "$T/bad-field.yaml"
if node "$HERE/validate.js" tcp "$T/bad-field.yaml" > "$T/out" 2>&1 ||
   ! grep -q 'securityContext.readOnlyRootFileSystem" (did you mean "readOnlyRootFilesystem"?)' \
     "$T/out"; then
  echo "FAIL: a misspelled field was not refused"; cat "$T/out"; status=1
fi
sed 's/^  GDRSTORE_NEEDS: tcp$/  GDRSTORE_NEEDS: rdma/' "$T/tcp.yaml" > "$T/bad-policy.yaml"
if node "$HERE/validate.js" tcp "$T/bad-policy.yaml" > "$T/out" 2>&1 ||
   ! grep -q "readiness check is not 'gdrctl doctor --needs tcp'" "$T/out"; then
  echo "FAIL: a tcp pod asking for RDMA readiness was not refused"; cat "$T/out"; status=1
fi
# Host PID where it is not needed (the daemon), and not where it is (the agent, for workloads'
# CUDA IPC handles): both refused.
awk '/^kind: DaemonSet/ { ds = 1 } /^  name: gdrstored$/ && ds { d = 1 }
     { print } /^      hostNetwork: true$/ && d && !done { print "      hostPID: true"; done = 1 }' \
  "$T/tcp.yaml" > "$T/bad-pid.yaml"
if node "$HERE/validate.js" tcp "$T/bad-pid.yaml" > "$T/out" 2>&1 ||
   ! grep -q "host PID: only gdragent needs it" "$T/out"; then
  echo "FAIL: host PID on gdrstored was not refused"; cat "$T/out"; status=1
fi
grep -v '^      hostPID: true' "$T/tcp.yaml" > "$T/no-pid.yaml"
if node "$HERE/validate.js" tcp "$T/no-pid.yaml" > "$T/out" 2>&1 ||
   ! grep -q "gdragent without host PID" "$T/out"; then
  echo "FAIL: gdragent without host PID was not refused"; cat "$T/out"; status=1
fi
# The tcp overlay's ConfigMaps as the real daemon and agent read them (the pod's paths and
# addresses moved to a scratch directory and loopback): both start, the agent's readiness probe
# command answers through the agent, and both stop cleanly on SIGTERM with their drain line.
B=$(cd "$1" && pwd)
# The Secret gdrstore-tokens, as an operator makes it.
echo "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n') name=operator admin=yes" > "$T/tokens"
chmod 0600 "$T/tokens"
node "$HERE/config_of.js" "$T/tcp.yaml" gdrstored-config gdrstored.conf |
  sed -e "s#/var/lib/gdrstored#$T/data#" -e 's#0\.0\.0\.0:[0-9]*#127.0.0.1:0#' \
    -e "s#/etc/gdrstore-tokens/tokens#$T/tokens#" > "$T/gdrstored.conf"
mkdir -p "$T/data"
"$B/daemon/gdrstored" --config "$T/gdrstored.conf" --port-file "$T/port" > "$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 600); do [[ -s $T/port ]] && break; sleep 0.05; done
node "$HERE/config_of.js" "$T/tcp.yaml" gdragent-config gdragent.conf |
  sed -e "s#/run/gdragent#$T#" -e "s#gdrstored.gdrstore.svc.cluster.local:50051#127.0.0.1:$(cat "$T/port")#" \
    -e "s#/etc/gdrstore-tokens/tokens#$T/tokens#" > "$T/gdragent.conf"
"$B/agent/gdragent" --config "$T/gdragent.conf" \
  --transport="$(node "$HERE/config_of.js" "$T/tcp.yaml" gdrstore-transport GDRSTORE_TRANSPORT)" \
  > "$T/agent.log" 2>&1 &
APID=$!
for _ in $(seq 600); do [[ -S $T/agent.sock ]] && break; sleep 0.05; done
if ! "$B/client/gdrctl" --agent "$T/agent.sock" info > "$T/info" 2>&1 || ! grep -q "vol0" "$T/info"; then
  echo "FAIL: the agent's readiness probe command did not answer"; cat "$T/info" "$T/agent.log"
  status=1
fi
# The agent's probes as its DaemonSet runs them, with the daemon stopped: liveness asks the agent
# alone and passes (a storage outage restarts no agent), readiness asks the daemons and fails.
probe() {
  mapfile -t cmd < <(node "$HERE/probe_of.js" "$T/tcp.yaml" gdragent "$1" |
    sed -e "s#^/usr/sbin/gdragent\$#$B/agent/gdragent#" \
      -e "s#^/usr/bin/gdrctl\$#$B/client/gdrctl#" -e "s#/run/gdragent#$T#")
  "${cmd[@]}" > "$T/$1" 2>&1
}
kill -TERM "$DPID"
wait "$DPID" || { echo "FAIL: daemon exited non-zero on SIGTERM"; status=1; }
probe livenessProbe || { echo "FAIL: the agent's liveness probe failed with its daemon down";
  cat "$T/livenessProbe"; status=1; }
probe readinessProbe && { echo "FAIL: the agent's readiness probe passed with its daemon down";
  status=1; }
kill -TERM "$APID"
wait "$APID" || { echo "FAIL: agent exited non-zero on SIGTERM"; status=1; }
probe livenessProbe && { echo "FAIL: the agent's liveness probe passed with the agent gone";
  status=1; }
for log in agent daemon; do
  if ! grep -q "SIGTERM: draining" "$T/$log.log" || ! grep -q "stopped cleanly" "$T/$log.log"; then
    echo "FAIL: $log: no drain and clean stop logged"; cat "$T/$log.log"; status=1
  fi
done

# gdrstored's command as kubelet expands it, the pod's address 127.0.0.1 (its config and ports
# moved as above): /metrics answers there and nowhere else of the host (127.0.0.2 is refused).
mapfile -t dcmd < <(node "$HERE/node_prerequisites.js" command "$T/tcp.yaml" gdrstored 127.0.0.1 |
  sed -e "s#^/usr/sbin/gdrstored\$#$B/daemon/gdrstored#" \
    -e "s#/etc/gdrstored/gdrstored.conf#$T/gdrstored.conf#" \
    -e 's#^\(--metrics-listen=127.0.0.1\):9187$#\1:0#')
"${dcmd[@]}" --port-file "$T/port2" --metrics-port-file "$T/mport" > "$T/metrics.log" 2>&1 &
DPID=$!
for _ in $(seq 600); do [[ -s $T/mport ]] && break; sleep 0.05; done
if ! curl -sf "http://127.0.0.1:$(cat "$T/mport")/metrics" > "$T/metrics" ||
   ! grep -q '^gdr' "$T/metrics"; then
  echo "FAIL: no metrics on the pod's address"; cat "$T/metrics.log"; status=1
fi
if curl -s -o /dev/null "http://127.0.0.2:$(cat "$T/mport")/metrics"; then
  echo "FAIL: metrics served beyond the pod's address (127.0.0.2)"; status=1
fi
kill -TERM "$DPID"
wait "$DPID" || { echo "FAIL: gdrstored run by its DaemonSet's command exited non-zero"; status=1; }

((status == 0)) && echo "kubernetes manifests: every overlay and example valid; broken copies refused; the tcp overlay's configs run"
exit $status
