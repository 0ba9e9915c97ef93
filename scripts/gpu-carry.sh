#!/usr/bin/env bash
# Packs what a lent GPU host needs to run the project's binaries into a folder (default
# .gpu-carry/): stripped executables in bin/ and the non-glibc shared libraries they load in lib/
# (gRPC, protobuf, Abseil, rdma-core, ...). The host's own libc, libm, libstdc++, libgcc_s and
# loader are never carried: they must come from the host. Run there as
#   LD_LIBRARY_PATH=.gpu-carry/lib .gpu-carry/bin/gdr_bench ...
# usage: scripts/gpu-carry.sh BUILD_DIR [OUT_DIR] [SUFFIX]
#   SUFFIX (e.g. -before) is appended to each executable's name, so two builds can be carried
#   side by side for an A/B run in one call.
set -euo pipefail
B=${1:?usage: gpu-carry.sh BUILD_DIR [OUT_DIR] [SUFFIX]}
OUT=${2:-.gpu-carry}
SUFFIX=${3:-}
mkdir -p "$OUT/bin" "$OUT/lib"
exes=(daemon/gdrstored client/gdrctl bench/gdr_bench)
libs=()
[[ -f $B/client/libgdrclient.so.1 ]] && libs+=(client/libgdrclient.so.1)
for e in "${exes[@]}"; do
  [[ -f $B/$e ]] || { echo "gpu-carry: $B/$e is missing (build it first)" >&2; exit 1; }
done
# The GPU test binaries (tests/gpu/run-gpu-tests.sh) when they were built.
for t in agent/gdragent tests/common/gpu_memory_test tests/integration/gpu_data_path_test \
         tests/integration/gdrctl_gpu_test tests/common/gpu_ipc_test \
         tests/integration/local_transport_test; do
  if [[ -f $B/$t ]]; then exes+=("$t"); else echo "gpu-carry: no $B/$t, not carried" >&2; fi
done
for e in "${exes[@]}"; do
  strip -o "$OUT/bin/$(basename "$e")$SUFFIX" "$B/$e"
done
for l in ${libs[@]+"${libs[@]}"}; do strip -o "$OUT/lib/$(basename "$l")" "$B/$l"; done
# Every library the executables load, except the host's own C/C++ runtime.
host_own='^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux-x86-64|linux-vdso)\.'
for e in "${exes[@]}" ${libs[@]+"${libs[@]}"}; do
  ldd "$B/$e" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r so; do
  name=$(basename "$so")
  [[ $name =~ $host_own ]] && continue
  [[ -f $OUT/lib/$name ]] || cp -L "$so" "$OUT/lib/$name"
done
# The wheel a workload image installs (tests/gpu/pod_view.sh puts it in a venv), when the build
# has its library.
if [[ -z $SUFFIX && -f $B/client/libgdrclient.so.1 ]]; then
  rm -f "$OUT"/gdrstore-*.whl
  bash "$(dirname "$0")/build-wheel.sh" "$B" "$OUT" >/dev/null
fi
du -sh "$OUT" | awk '{print "gpu-carry: " $1 " in '"$OUT"'"}'
