#!/usr/bin/env bash
# libgdrclient as callers outside the tree get it: `cmake --install` into a fresh prefix, then
# a C program (the C ABI) and a C++ program (the C++ API) built against that prefix both ways,
# with pkg-config (gdrstore.pc) and with CMake (find_package(gdrstore CONFIG)), and each run
# against a gdrstored started from the same prefix. Usage: library_consumer_test.sh BUILD_DIR.
set -euo pipefail
trap 'echo "library_consumer_test: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build_dir=$(realpath "$1")
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
prefix=$tmp/prefix
cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log"
# The C demo: its ordinary steps and its hostile ones (two files, threads).
demo=$src/tests/client/c
demo_c=("$demo/c_abi_demo.c" "$demo/c_abi_hostile.c")

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c11 -pthread -o "$tmp/c_pc" "${demo_c[@]}" $(pkg-config --cflags --libs gdrstore)
c++ -std=c++20 -o "$tmp/cxx_pc" "$src/tests/deploy/consumer/consumer.cc" \
  $(pkg-config --cflags --libs gdrstore)
echo "built with pkg-config: c_pc, cxx_pc"
cmake -S "$src/tests/deploy/consumer" -B "$tmp/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DDEMO_C="${demo_c[0]};${demo_c[1]}" >"$tmp/cmake.log"
cmake --build "$tmp/cmake" >>"$tmp/cmake.log"
echo "built with find_package(gdrstore CONFIG): c_consumer, cxx_consumer"
# Each binary must take libgdrclient from the prefix, not from the build tree.
# (ldd's output is captured first: `grep -q` ending a pipe would fail it under pipefail.)
for b in "$tmp/c_pc" "$tmp/cxx_pc" "$tmp/cmake/c_consumer" "$tmp/cmake/cxx_consumer"; do
  libs=$(LD_LIBRARY_PATH=$prefix/lib ldd "$b")
  grep -q "libgdrclient.so.1 => $prefix/lib/" <<<"$libs" \
    || { echo "$b does not load libgdrclient from $prefix/lib: $libs"; exit 1; }
done

"$prefix/sbin/gdrstored" --listen 127.0.0.1:0 --port-file "$tmp/port" --volume vol0=64MiB \
  --log-level warning >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -s $tmp/port ]] && break; sleep 0.05; done
addr=127.0.0.1:$(cat "$tmp/port")
export LD_LIBRARY_PATH=$prefix/lib
"$tmp/c_pc" "$addr" vol0 | tail -1
"$tmp/cmake/c_consumer" "$addr" vol0 | tail -1
"$tmp/cxx_pc" "$addr" vol0
"$tmp/cmake/cxx_consumer" "$addr" vol0
echo "library_consumer_test: PASSED"
