#!/usr/bin/env bash
# Builds the .debs with CPack (gdrstored, libgdrclient1, libgdrclient-dev, python3-gdrstore),
# unpacks them into a fresh root with dpkg -x, checks that every file is where the unit and docs
# say and in the package it belongs to, that the control data is right, and that the unpacked
# daemon starts from that root with the packaged config (volumes and listen overridden on the
# command line), serves the packaged CLI and the packaged Python package, and stops with exit 0
# on SIGTERM.
set -euo pipefail
trap 'echo "package_test: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build_dir=$(realpath "$1")
tmp=$(mktemp -d)
pid=""
agent=""
cleanup() {
  if [[ -n $agent ]] && kill -0 "$agent" 2>/dev/null; then kill -KILL "$agent"; fi
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
(cd "$build_dir" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; exit 1; }
deb=$(ls "$tmp"/pkg/gdrstored_*.deb)
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"
dpkg-deb -I "$deb" > "$tmp/info"
grep -q "^ Package: gdrstored$" "$tmp/info"
grep -q "^ Depends: .*libgrpc" "$tmp/info" || grep -q "^ Depends: .*libgrpc++" "$tmp/info"
grep -q "^ Depends: .*systemd" "$tmp/info"
# (No `grep -q` at the end of a pipe: under pipefail its early exit fails the writer.)
control_files=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)
grep -qx "./conffiles" <<<"$control_files" || { echo "no conffiles in: $control_files"; exit 1; }
[[ $(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) == $'/etc/gdrstored/gdrstored.conf\n/etc/gdragent/gdragent.conf' ]]

root=$tmp/root
mkdir "$root"
dpkg -x "$deb" "$root"
for f in usr/sbin/gdrstored usr/bin/gdrctl usr/lib/systemd/system/gdrstored.service \
         etc/gdrstored/gdrstored.conf usr/share/doc/gdrstored/operations.md \
         usr/share/doc/gdrstored/README.md usr/share/gdrstored/grafana/gdrstored.json \
         usr/sbin/gdragent usr/lib/systemd/system/gdragent.service etc/gdragent/gdragent.conf \
         usr/share/doc/gdrstored/agent.md; do
  [[ -e $root/$f ]] || { echo "missing from the package: /$f"; dpkg-deb -c "$deb"; exit 1; }
done
# The library, its development files and the Python package are packages of their own.
lib_deb=$(ls "$tmp"/pkg/libgdrclient1_*.deb)
dev_deb=$(ls "$tmp"/pkg/libgdrclient-dev_*.deb)
py_deb=$(ls "$tmp"/pkg/python3-gdrstore_*_all.deb)
for d in "$lib_deb" "$dev_deb" "$py_deb"; do dpkg -x "$d" "$root"; done
for f in usr/lib/libgdrclient.so.1 usr/lib/libgdrclient.so usr/include/gdrstore/client.h \
         usr/include/gdrstore/gdrstore.h usr/include/gdrstore/v1/gdrstore.grpc.pb.h \
         usr/include/gdrstore/cluster.h usr/include/gdrstore/v1/cluster.pb.h \
         usr/lib/pkgconfig/gdrstore.pc usr/lib/cmake/gdrstore/gdrstoreConfig.cmake \
         usr/lib/python3/dist-packages/gdrstore/__init__.py; do
  [[ -e $root/$f ]] || { echo "missing from the packages: /$f"; exit 1; }
done
[[ -z $(dpkg-deb -c "$deb" | grep -E "libgdrclient|include/gdrstore" || true) ]]
dpkg-deb -I "$dev_deb" >"$tmp/dev_info"
grep -q "^ Depends: libgdrclient1 (= " "$tmp/dev_info"
dpkg-deb -I "$py_deb" >"$tmp/py_info"
grep -q "^ Depends: python3, libgdrclient1 (= " "$tmp/py_info"
lib_ctrl=$(dpkg-deb --ctrl-tarfile "$lib_deb" | tar -t)
grep -qx "./shlibs" <<<"$lib_ctrl" || { echo "no shlibs in libgdrclient1: $lib_ctrl"; exit 1; }
[[ -x $root/usr/sbin/gdrstored && -x $root/usr/bin/gdrctl ]]
grep -q '^ExecStart=/usr/sbin/gdrstored --config /etc/gdrstored/gdrstored.conf$' \
  "$root/usr/lib/systemd/system/gdrstored.service"
cmp "$root/usr/lib/systemd/system/gdrstored.service" "$(dirname "$0")/../../deploy/systemd/gdrstored.service"
cmp "$root/usr/lib/systemd/system/gdragent.service" "$(dirname "$0")/../../deploy/systemd/gdragent.service"

# The unpacked binaries run from the fresh root.
version=$("$root/usr/bin/gdrctl" --version)
# The version is written once, in python/gdrstore/_version.py (CMake's project() reads it).
want=$(sed -n 's/^__version__ = "\([0-9.]*\)"$/\1/p' "$(dirname "$0")/../../python/gdrstore/_version.py")
[[ -n $want ]] || { echo "no __version__ in python/gdrstore/_version.py"; exit 1; }
[[ $version == *"$want"* ]] || { echo "gdrctl --version says '$version', want $want"; exit 1; }
"$root/usr/sbin/gdrstored" --config "$root/etc/gdrstored/gdrstored.conf" --listen 127.0.0.1:0 \
  --port-file "$tmp/port" --volume "vol0=16MiB" --volume "f=4MiB,file=$tmp/f.img" 2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 600); do
  [[ -s $tmp/port ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/daemon.log"; exit 1; }
  sleep 0.05
done
[[ -s $tmp/port ]] || { echo "no port file"; cat "$tmp/daemon.log"; exit 1; }
"$root/usr/bin/gdrctl" -p "$(cat "$tmp/port")" write --volume f -s 64KiB --verify
# The packaged Python package, on the packaged library, against the packaged daemon.
GDRSTORE_LIBRARY=$root/usr/lib/libgdrclient.so.1 PYTHONPATH=$root/usr/lib/python3/dist-packages \
  /usr/bin/python3 -c "
import sys, gdrstore
assert gdrstore.__file__.startswith('$root'), gdrstore.__file__
with gdrstore.Client('127.0.0.1:$(cat "$tmp/port")') as c:
    b = bytearray(65536)
    c.get('vol0', 0, into=b)
print('python3-gdrstore: 64 KiB moved with the packaged package and library')
"
# The packaged agent, with the packaged config but a socket of its own, in front of that daemon.
"$root/usr/sbin/gdragent" --config "$root/etc/gdragent/gdragent.conf" --socket "$tmp/agent.sock" \
  --daemon "127.0.0.1:$(cat "$tmp/port")" 2>"$tmp/agent.log" &
agent=$!
for _ in $(seq 600); do
  [[ -S $tmp/agent.sock ]] && break
  kill -0 "$agent" 2>/dev/null || { cat "$tmp/agent.log"; exit 1; }
  sleep 0.05
done
[[ -S $tmp/agent.sock ]] || { echo "no agent socket"; cat "$tmp/agent.log"; exit 1; }
kill -TERM "$agent"
rc=0
wait "$agent" || rc=$?
agent=""
[[ $rc -eq 0 ]] || { echo "gdragent exited $rc"; cat "$tmp/agent.log"; exit 1; }
grep -q "stopped cleanly" "$tmp/agent.log"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || { echo "daemon exited $rc"; cat "$tmp/daemon.log"; exit 1; }
grep -q "stopped cleanly" "$tmp/daemon.log"
echo "package OK: $(dpkg-deb -c "$deb" | wc -l) entries, installs into a fresh root and runs"
