#!/usr/bin/env bash
# check_file_length.sh must name a source file over 600 lines that gives no reason, and pass it
# once the reason is there.
set -euo pipefail
CHECK="$(cd "$(dirname "$0")" && pwd)/check_file_length.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/daemon/store"
f=daemon/store/long.cc
{ echo "// A long file."; for i in $(seq 1 600); do echo "int x$i = $i;"; done; } >"$work/$f"
if out=$(bash "$CHECK" "$work" 2>&1) || [[ $out != *"$f: 601 lines"* ]]; then
  echo "FAIL: a 601-line file without a reason was not reported: $out"; exit 1
fi
echo "ok: $f refused"
sed -i '1a // Over 600 lines because: one table of 600 entries.' "$work/$f"
if ! out=$(bash "$CHECK" "$work" 2>&1); then
  echo "FAIL: a long file with its reason was refused: $out"; exit 1
fi
echo "ok: $f with its reason allowed"
