#!/usr/bin/env bash
# The symbols libgdrclient.so exports: every C ABI function of gdrstore.h, and otherwise only
# what belongs to the C++ API of namespace gdrstore (its classes, and the protobuf templates
# instantiated for its wire messages). Fails naming any other exported symbol (an internal of
# namespace gdr, Abseil, gRPC... that leaked) and any C function the header declares that the
# library does not export.
set -euo pipefail
LIB=$1
HEADER=$(dirname "$0")/../../../client/include/gdrstore/gdrstore.h
exported=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVWu]$/ {sub(/@.*/, "", $3); print $3}')
bad=0 n_c=0 n_cxx=0
while IFS= read -r sym; do
  [[ -z $sym ]] && continue
  if [[ $sym == gdrstore_* ]]; then n_c=$((n_c + 1)); continue; fi
  plain=$(c++filt "$sym")
  # A member of namespace gdrstore (function, vtable, typeinfo), or a protobuf template
  # instantiated for one of its wire messages.
  if [[ $sym =~ ^_Z(T[VIS])?Z?NK?8gdrstore || $plain == *"<gdrstore::v1::"* ]]; then
    n_cxx=$((n_cxx + 1))
    continue
  fi
  echo "leaked: $sym ($plain)"
  bad=1
done <<<"$exported"
for fn in $(grep -o 'gdrstore_[a-z_]*(' "$HEADER" | tr -d '(' | sort -u); do
  if ! grep -qx "$fn" <<<"$exported"; then echo "missing: $fn"; bad=1; fi
done
if ((bad)); then exit 1; fi
echo "exports: $n_c C ABI functions, $n_cxx C++ API symbols of namespace gdrstore, nothing else"
