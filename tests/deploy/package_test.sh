#!/usr/bin/env bash
# Builds the .deb with CPack, unpacks it into a fresh root with dpkg -x, checks that every file
# is where the unit and docs say, that the control data is right, and that the unpacked daemon
# starts from that root with the packaged config (volumes and listen overridden on the command
# line), serves, and stops with exit 0 on SIGTERM.
set -euo pipefail
trap 'echo "package_test: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build_dir=$(realpath "$1")
tmp=$(mktemp -d)
pid=""
cleanup() {
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
[[ $(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) == "/etc/gdrstored/gdrstored.conf" ]]

root=$tmp/root
mkdir "$root"
dpkg -x "$deb" "$root"
for f in usr/sbin/gdrstored usr/bin/gdrctl usr/lib/systemd/system/gdrstored.service \
         etc/gdrstored/gdrstored.conf usr/share/doc/gdrstored/operations.md \
         usr/share/doc/gdrstored/README.md usr/include/gdrstore/client.h; do
  [[ -e $root/$f ]] || { echo "missing from the package: /$f"; dpkg-deb -c "$deb"; exit 1; }
done
[[ -x $root/usr/sbin/gdrstored && -x $root/usr/bin/gdrctl ]]
grep -q '^ExecStart=/usr/sbin/gdrstored --config /etc/gdrstored/gdrstored.conf$' \
  "$root/usr/lib/systemd/system/gdrstored.service"
cmp "$root/usr/lib/systemd/system/gdrstored.service" "$(dirname "$0")/../../deploy/systemd/gdrstored.service"

# The unpacked binaries run from the fresh root.
version=$("$root/usr/bin/gdrctl" --version)
want=$(grep -oP 'project\(gdrstored VERSION \K[0-9.]+' "$(dirname "$0")/../../CMakeLists.txt")
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
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || { echo "daemon exited $rc"; cat "$tmp/daemon.log"; exit 1; }
grep -q "stopped cleanly" "$tmp/daemon.log"
echo "package OK: $(dpkg-deb -c "$deb" | wc -l) entries, installs into a fresh root and runs"
