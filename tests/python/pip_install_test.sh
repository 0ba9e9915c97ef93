#!/usr/bin/env bash
# `pip install ./python` as a user does it, with Debian's pip and setuptools (no index: nothing
# is downloaded), into a fresh virtualenv; the installed package then moves verified bytes
# against a real daemon, taking libgdrclient from GDRSTORE_LIBRARY.
# Usage: pip_install_test.sh GDRSTORED LIBGDRCLIENT.
set -euo pipefail
trap 'echo "pip_install_test: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
gdrstored=$1
export GDRSTORE_LIBRARY=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
cp -r "$src/python" "$tmp/python"  # pip builds in place: keep the source tree clean
"$tmp/venv/bin/pip" install --quiet --no-build-isolation --no-index "$tmp/python"
"$gdrstored" --listen 127.0.0.1:0 --port-file "$tmp/port" --volume vol0=16MiB \
  --log-level warning >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -s $tmp/port ]] && break; sleep 0.05; done
cd "$tmp"  # away from the source tree, so only the installed package can be imported
"$tmp/venv/bin/python" - "127.0.0.1:$(cat "$tmp/port")" <<'PY'
import sys
import gdrstore
assert "site-packages" in gdrstore.__file__, gdrstore.__file__
with gdrstore.Client(sys.argv[1]) as c:
    buf = bytearray(1 << 20)
    c.get("vol0", 4096, into=buf)
    import numpy as np
    gdrstore.verify(np.frombuffer(buf, dtype=np.uint8), "vol0", 4096)
print("installed gdrstore from", gdrstore.__file__, "moved and verified 1 MiB")
PY
echo "pip_install_test: PASSED"
