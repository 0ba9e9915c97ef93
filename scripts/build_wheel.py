#!/usr/bin/env python3
"""Makes the gdrstore wheel (scripts/build-wheel.sh runs it): the Python package of python/
with libgdrclient.so.1 from a build tree and every shared library it loads that a manylinux host
does not provide itself, so that `pip install --no-deps WHEEL` into any Python >= 3.9 on
x86_64 Linux with a new enough glibc gives a working `import gdrstore`, with no environment
variable and no package but the wheel.

The carried libraries sit in gdrstore/_lib/, stripped, each with RPATH $ORIGIN. As auditwheel
does, each gets a name of its own (libgrpc.so.29 -> libgrpc-1a2b3c4d.so.29, from its bytes) and
every DT_NEEDED that named it is rewritten, so they cannot meet the copies of gRPC, protobuf or
Abseil that torch or grpcio bring into the same process. The host's RDMA stack (libibverbs,
libmlx5, librdmacm) is the exception: libibverbs loads the host's providers, which bind to it by
its own name and must match it, so its copies keep their names and sit in gdrstore/_lib/host/,
outside every RPATH; gdrstore._native loads the host's own when there is one and these only
where there is none (a workload image without rdma-core, which reaches devices through the
node agent anyway).

The platform tag is the newest glibc symbol version the carried files need. The zip is the same
bytes for the same inputs: entries sorted, fixed timestamps and modes, RECORD with sha256.
Uses only the standard library and binutils' objdump and strip, and patchelf."""

import argparse
import ast
import base64
import hashlib
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import tomllib
import zipfile

# Every manylinux host has these (glibc, the C++ runtime) or the GPU driver brings them: a wheel
# that carried its own would fight the host's.
HOST_PROVIDED = {
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libc.so.6", "libm.so.6", "libdl.so.2",
    "libpthread.so.0", "librt.so.1", "libresolv.so.2", "libutil.so.1", "libanl.so.1",
    "libstdc++.so.6", "libgcc_s.so.1", "libcuda.so.1",
}
# The host's RDMA stack, in the order they must be loaded (each needs the ones before it).
HOST_FIRST = ("libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1")
LIBRARY = "libgdrclient.so.1"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: the same for every build
SIZE_LIMIT = 64 << 20  # what a tree copied to the GPU host may hold in all


def fail(message):
    sys.exit(f"build-wheel: {message}")


def run(*argv):
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        fail(f"{argv[0]} is not installed (scripts/install-deps.sh installs it)")
    except subprocess.CalledProcessError as e:
        fail(f"{' '.join(argv)} failed: {e.stderr.strip()}")


def version_of(package_dir):
    """__version__ from _version.py, read without importing the package (which loads the
    library)."""
    path = os.path.join(package_dir, "_version.py")
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets
                                             if isinstance(t, ast.Name)] == ["__version__"]:
            return ast.literal_eval(node.value)
    fail(f"{path} has no __version__ = \"X.Y.Z\"")


def loaded_libraries(library):
    """(soname, path) of every library the loader maps for `library`, as ldd lists them."""
    found = []
    for line in run("ldd", library).splitlines():
        m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if not m:
            continue  # linux-vdso and the loader itself, which ldd lists without a path
        name, where = m.groups()
        if where == "not found":
            fail(f"{library} needs {name}, which this host does not have")
        found.append((name, os.path.realpath(where)))
    return found


def unique_name(soname, path):
    """libfoo.so.3 -> libfoo-<8 hex of its bytes>.so.3, as auditwheel names what it carries."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, dot, rest = soname.partition(".so")
    return f"{stem}-{digest}{dot}{rest}"


def needed(path):
    return run("patchelf", "--print-needed", path).split()


def glibc_needed(paths):
    """The newest GLIBC_X.Y, and GLIBCXX_X.Y.Z, that the files' undefined symbols ask for."""
    glibc, glibcxx = (2, 17), ()
    for path in paths:
        for line in run("objdump", "-T", path).splitlines():
            if "*UND*" not in line:
                continue
            for m in re.finditer(r"\bGLIBC_(\d+)\.(\d+)\b", line):
                glibc = max(glibc, (int(m[1]), int(m[2])))
            for m in re.finditer(r"\bGLIBCXX_([\d.]+)\b", line):
                glibcxx = max(glibcxx, tuple(int(x) for x in m[1].split(".")))
    return glibc, glibcxx


def stage_libraries(library, lib_dir):
    """Copies, strips and patches the library and what it loads into lib_dir; the files made."""
    deps = [(n, p) for n, p in loaded_libraries(library) if n not in HOST_PROVIDED]
    renamed = {n: unique_name(n, p) for n, p in deps if n not in HOST_FIRST}
    host_dir = os.path.join(lib_dir, "host")
    os.makedirs(host_dir)
    plan = [(LIBRARY, library, os.path.join(lib_dir, LIBRARY), "$ORIGIN")]
    for name, path in deps:
        if name in HOST_FIRST:
            plan.append((name, path, os.path.join(host_dir, name), "$ORIGIN/.."))
        else:
            plan.append((name, path, os.path.join(lib_dir, renamed[name]), "$ORIGIN"))
    made = []
    for name, src, dst, rpath in plan:
        # --strip-unneeded keeps what the dynamic loader uses and drops debug info and the
        # static symbol table (the build tree's library is mostly debug info).
        run("strip", "--strip-unneeded", "-o", dst, src)
        # One kind of change per patchelf run: Debian 12's patchelf (0.14) mixes up the
        # strings of a run that renames DT_NEEDED entries and also sets the SONAME or RPATH.
        # (Each run that grows the string table moves it past the segments: fewer runs, a
        # smaller file.)
        replace = [x for dep in needed(dst) if dep in renamed for x in
                   ("--replace-needed", dep, renamed[dep])]
        if replace:
            run("patchelf", *replace, dst)
        if name in renamed:
            run("patchelf", "--set-soname", renamed[name], dst)
        run("patchelf", "--force-rpath", "--set-rpath", rpath, dst)
        os.chmod(dst, 0o755)
        made.append(dst)
    return made


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", required=True, help="the build tree's libgdrclient.so.1")
    ap.add_argument("--python", required=True, help="the source tree's python/ directory")
    ap.add_argument("--out", required=True, help="directory the wheel is written to")
    a = ap.parse_args()
    if not os.path.isfile(a.library):
        fail(f"no {a.library}: build the gdrclient_shared target first")
    package_dir = os.path.join(a.python, "gdrstore")
    with open(os.path.join(a.python, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    name, version = project["name"], version_of(package_dir)
    arch = platform.machine()

    with tempfile.TemporaryDirectory(prefix="gdrstore-wheel-") as tmp:
        lib_dir = os.path.join(tmp, "gdrstore", "_lib")
        os.makedirs(lib_dir)
        libs = stage_libraries(os.path.realpath(a.library), lib_dir)
        (major, minor), glibcxx = glibc_needed(libs)
        tag = f"py3-none-manylinux_{major}_{minor}_{arch}"

        files = {}  # path in the wheel -> (bytes, mode)
        for root, dirs, names in os.walk(package_dir):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for n in names:
                if n.endswith(".py") or n == "py.typed":
                    src = os.path.join(root, n)
                    rel = os.path.relpath(src, a.python)
                    with open(src, "rb") as f:
                        files[rel] = (f.read(), 0o644)
        for path in libs:
            with open(path, "rb") as f:
                files[os.path.relpath(path, tmp)] = (f.read(), 0o755)

        dist_info = f"{name}-{version}.dist-info"
        meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: {project['description']}",
                f"Requires-Python: {project['requires-python']}"]
        info = {
            "METADATA": "\n".join(meta) + "\n",
            "WHEEL": "Wheel-Version: 1.0\nGenerator: gdrstore scripts/build_wheel.py\n"
                     f"Root-Is-Purelib: false\nTag: {tag}\n",
            "top_level.txt": "gdrstore\n",
        }
        for n, text in info.items():
            files[f"{dist_info}/{n}"] = (text.encode(), 0o644)
        record = "".join(f"{p},{record_hash(d)},{len(d)}\n" for p, (d, _) in sorted(files.items()))
        record += f"{dist_info}/RECORD,,\n"

        os.makedirs(a.out, exist_ok=True)
        wheel = os.path.join(a.out, f"{name}-{version}-{tag}.whl")
        partial = wheel + ".partial"
        # The package first, then its .dist-info with RECORD last, as installers expect.
        entries = sorted(p for p in files if not p.startswith(dist_info))
        entries += sorted(p for p in files if p.startswith(dist_info))
        with zipfile.ZipFile(partial, "w") as z:
            for p in entries + [f"{dist_info}/RECORD"]:
                data, mode = files[p] if p in files else (record.encode(), 0o644)
                zi = zipfile.ZipInfo(p, ZIP_TIME)
                zi.create_system = 3  # Unix: the mode below is read
                zi.external_attr = (stat.S_IFREG | mode) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data, compresslevel=9)
        size = os.path.getsize(partial)
        if size > SIZE_LIMIT:
            os.unlink(partial)
            fail(f"the wheel would be {size} bytes, over the {SIZE_LIMIT} a tree copied to the "
                 "GPU host may hold")
        os.replace(partial, wheel)
    # libstdc++ is the host's (never carried): it must be at least as new as the build's.
    print(f"build-wheel: {len(libs)} libraries; needs glibc {major}.{minor}"
          + (f", libstdc++ with GLIBCXX_{'.'.join(map(str, glibcxx))}" if glibcxx else "")
          + f"; {size} bytes", file=sys.stderr)
    print(wheel)


if __name__ == "__main__":
    main()
