#!/usr/bin/env bash
# systemd-analyze verify of the unit as `cmake --install` writes it. The install goes to a
# scratch prefix so that ExecStart names a binary that exists (verify checks it); the unit's
# directives are exactly those of deploy/systemd/gdrstored.service. Any warning fails the test.
set -euo pipefail
build_dir=$1
command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing (install systemd)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
unit=$tmp/prefix/lib/systemd/system/gdrstored.service
grep -q "^ExecStart=$tmp/prefix/sbin/gdrstored --config $tmp/prefix/etc/gdrstored/gdrstored.conf$" "$unit"
# The installed unit differs from the source only in the install paths.
diff <(sed "s|$tmp/prefix/sbin/|/usr/sbin/|; s|$tmp/prefix/etc/|/etc/|; s|file:$tmp/prefix/share/|file:/usr/share/|" "$unit") \
     "$(dirname "$0")/../../deploy/systemd/gdrstored.service"
out=$(systemd-analyze verify "$unit" 2>&1) || { echo "$out"; exit 1; }
if [[ -n $out ]]; then
  echo "systemd-analyze verify printed warnings:"
  echo "$out"
  exit 1
fi
# Directives the unit must keep.
for d in Type=notify WatchdogSec= Restart=on-failure ExecReload= LimitMEMLOCK=infinity \
         NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes DynamicUser=yes \
         DeviceAllow=char-infiniband_verbs StateDirectory=gdrstored ReadWritePaths=; do
  grep -q "^$d" "$unit" || { echo "unit lacks $d"; exit 1; }
done
# gdragent's unit, the same way.
agent_unit=$tmp/prefix/lib/systemd/system/gdragent.service
grep -q "^ExecStart=$tmp/prefix/sbin/gdragent --config $tmp/prefix/etc/gdragent/gdragent.conf$" "$agent_unit"
diff <(sed "s|$tmp/prefix/sbin/|/usr/sbin/|; s|$tmp/prefix/etc/|/etc/|; s|file:$tmp/prefix/share/|file:/usr/share/|" "$agent_unit") \
     "$(dirname "$0")/../../deploy/systemd/gdragent.service"
out=$(systemd-analyze verify "$agent_unit" 2>&1) || { echo "$out"; exit 1; }
if [[ -n $out ]]; then
  echo "systemd-analyze verify printed warnings on gdragent.service:"
  echo "$out"
  exit 1
fi
for d in Type=notify WatchdogSec= Restart=on-failure LimitMEMLOCK=infinity NoNewPrivileges=yes \
         ProtectSystem=strict DynamicUser=yes RuntimeDirectory=gdragent \
         RuntimeDirectoryPreserve=yes DeviceAllow=char-infiniband_verbs; do
  grep -q "^$d" "$agent_unit" || { echo "gdragent unit lacks $d"; exit 1; }
done
echo "systemd-analyze verify: $unit OK ($(systemd-analyze --version | head -1))"
