#!/usr/bin/env bash
# The wheel as a workload image uses it: scripts/build-wheel.sh makes it from the build tree
# (twice: the same bytes), its RECORD is checked, `pip install --no-deps` puts it offline into a
# fresh venv over Debian's python3 (with torch where it is installed, whose own protobuf is then
# in the process), and from outside the source tree, with no GDRSTORE_LIBRARY, `import gdrstore`
# loads the carried library and its carried gRPC/protobuf/Abseil, has the tree's __version__,
# and Client() with only GDRSTORE_ADDRESS set moves verified bytes to and from a real daemon.
# Then the same with the host's libibverbs and libmlx5 hidden (a mount namespace), as in an
# image without rdma-core: the wheel's stand-ins load instead.
# usage: wheel_test.sh BUILD_DIR
set -euo pipefail
trap 'echo "wheel_test: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
unset GDRSTORE_LIBRARY GDRSTORE_AGENT GDRSTORE_TOKEN_FILE GDRSTORE_ADDRESS
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

wheel=$(bash "$src/scripts/build-wheel.sh" "$build" "$tmp/a")
again=$(bash "$src/scripts/build-wheel.sh" "$build" "$tmp/b" 2>/dev/null)
cmp "$wheel" "$again" || { echo "wheel_test: two builds of the wheel differ" >&2; exit 1; }
version=$(sed -n 's/^__version__ = "\([0-9.]*\)"$/\1/p' "$src/python/gdrstore/_version.py")
[[ $(basename "$wheel") =~ ^gdrstore-$version-py3-none-manylinux_2_[0-9]+_x86_64\.whl$ ]] ||
  { echo "wheel_test: unexpected name $(basename "$wheel")" >&2; exit 1; }

# Every entry is in RECORD with its hash and size; nothing the host must provide is carried;
# every carried library finds what it needs among the carried ones or the host's own.
/usr/bin/python3 - "$wheel" <<'PY'
import base64, hashlib, re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
assert names == sorted(n for n in names if ".dist-info/" not in n) + \
    sorted(n for n in names if ".dist-info/" in n and not n.endswith("RECORD")) + \
    [n for n in names if n.endswith(".dist-info/RECORD")], names
record = {}
for line in z.read([n for n in names if n.endswith("RECORD")][0]).decode().splitlines():
    path, digest, size = line.rsplit(",", 2)
    record[path] = (digest, size)
for n in names:
    if n.endswith("RECORD"):
        continue
    data = z.read(n)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert record.pop(n) == (want, str(len(data))), n
    assert z.getinfo(n).date_time == (1980, 1, 1, 0, 0, 0), n
assert list(record) == [n for n in names if n.endswith("RECORD")], record
assert "gdrstore/py.typed" in names and "gdrstore/_lib/libgdrclient.so.1" in names
host_own = re.compile(r"gdrstore/_lib/(.*/)?(libc|libm|libstdc\+\+|libgcc_s|ld-linux.*|libdl|"
                      r"libpthread|librt|libcuda)\.so")
assert not [n for n in names if host_own.match(n)], names
print(f"wheel_test: {len(names)} entries, RECORD matches")
PY

/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --no-deps --no-index "$wheel"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
carried=$site/gdrstore/_lib
# The carried files' own needs: each met inside _lib/ or by the host's C/C++ runtime (and, for
# the RDMA libraries, the host's or the stand-ins in _lib/host/).
if ldd "$carried"/lib*.so* "$carried"/host/lib*.so* | grep 'not found' |
   grep -v 'libibverbs\|libmlx5\|librdmacm'; then
  echo "wheel_test: a carried library needs something neither carried nor the host's" >&2
  exit 1
fi

"$build/daemon/gdrstored" --listen 127.0.0.1:0 --port-file "$tmp/port" --volume vol0=16MiB \
  --log-level warning >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -s $tmp/port ]] && break; sleep 0.05; done
if [[ ! -s $tmp/port ]]; then
  echo "wheel_test: gdrstored did not start" >&2
  cat "$tmp/daemon.log" >&2
  exit 1
fi
export GDRSTORE_ADDRESS=127.0.0.1:$(cat "$tmp/port")

cat >"$tmp/check.py" <<'PY'
import os, re, sys
version, site, rdma_from = sys.argv[1:4]
try:
    import torch  # noqa: F401  (its own protobuf, Abseil... come into the process first)
    with_torch = "with torch " + torch.__version__
except ImportError:
    with_torch = "without torch"
import numpy as np
import gdrstore
import gdrstore._native
carried = os.path.join(site, "gdrstore", "_lib")
assert gdrstore.__file__.startswith(site), gdrstore.__file__
assert gdrstore.__version__ == version, (gdrstore.__version__, version)
assert gdrstore._native.path == os.path.join(carried, "libgdrclient.so.1"), gdrstore._native.path
maps = set(re.findall(r"\s(/\S+)$", open("/proc/self/maps").read(), re.M))
def mapped(pattern):
    return sorted(p for p in maps if re.search(pattern, os.path.basename(p)))
# The carried copies are the ones loaded (others of the same library may be there too: torch's
# protobuf, Python's own libssl), and gRPC (which nothing else here loads) only from the wheel.
for lib in ("libgdrclient", "libgrpc", "libgrpc\\+\\+", "libprotobuf", "libabsl_status", "libssl",
            "libcares"):
    paths = mapped(f"^{lib}(-[0-9a-f]{{8}})?\\.so")
    assert any(p.startswith(carried + "/") for p in paths), (lib, paths)
    if lib.startswith(("libgdrclient", "libgrpc")):
        assert all(p.startswith(carried + "/") for p in paths), (lib, paths)
for lib in ("libibverbs", "libmlx5"):
    paths = mapped(f"^{lib}\\.so")
    stand_in = os.path.join(carried, "host") + "/"
    assert len(paths) == 1 and paths[0].startswith(stand_in) == (rdma_from == "stand-in"), \
        (lib, paths, rdma_from)
with gdrstore.Client() as c:  # GDRSTORE_ADDRESS only
    data = np.random.default_rng(41).integers(0, 256, 1 << 20, dtype=np.uint8)
    assert c.put(data, "vol0", 4096) == data.nbytes
    back = np.zeros_like(data)
    assert c.get("vol0", 4096, into=back) == data.nbytes
    assert np.array_equal(back, data)
print(f"wheel_test: gdrstore {version} from the wheel ({with_torch}, RDMA libraries: "
      f"{rdma_from}) put and got 1 MiB through Client()")
PY
cd "$tmp"  # away from the source tree: only the installed package can be imported
"$tmp/venv/bin/python" "$tmp/check.py" "$version" "$site" host
# An image without rdma-core: the host's copies hidden under empty files, in a mount namespace
# of this test's own.
if unshare -rm true 2>/dev/null; then
  ibverbs=$(realpath "$(/sbin/ldconfig -p | awk '$1 == "libibverbs.so.1" { print $NF; exit }')")
  mlx5=$(realpath "$(/sbin/ldconfig -p | awk '$1 == "libmlx5.so.1" { print $NF; exit }')")
  unshare -rm bash -c 'mount --bind /dev/null "$1" && mount --bind /dev/null "$2" && shift 2 &&
                       exec "$@"' hide "$ibverbs" "$mlx5" \
    "$tmp/venv/bin/python" "$tmp/check.py" "$version" "$site" stand-in
else
  echo "wheel_test: no user namespaces here (unshare -rm): the stand-ins are not checked"
fi
echo "wheel_test: PASSED ($(stat -c %s "$wheel") bytes: $(basename "$wheel"))"
