#!/usr/bin/env bash
# A/B of two builds on one host: runs `gdr_bench --json` of build A and of build B alternately
# (A B A B ...), ROUNDS times each, with the same arguments, then prints per line of the report the
# median product value of each build and B/A. Alternating spreads the host's drift over both, so
# a ratio within the spread of the rounds is noise, not a change. Each run's JSON is kept in OUT.
# usage: bench/ab_compare.sh BENCH_A BENCH_B ROUNDS OUT -- GDR_BENCH_ARGS...
#   BENCH_X is "gdr_bench_binary:gdrstored_binary" (each bench starts its own daemon).
set -euo pipefail
A=$1 B=$2 ROUNDS=$3 OUT=$4
shift 4
[[ ${1:-} == -- ]] && shift
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    spec=$([[ $side == A ]] && echo "$A" || echo "$B")
    bench=${spec%%:*} daemon=${spec#*:}
    echo "ab: round $r $side: $bench --daemon $daemon $*" >&2
    "$bench" --daemon "$daemon" --json "$@" >"$OUT/$side-$r.json"
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {s: [json.load(open(f"{out}/{s}-{r}.json")) for r in range(1, rounds + 1)] for s in "AB"}
def lines(doc):
    rows = {r["name"]: (r["product"], r["unit"]) for r in doc.get("rows", [])}
    sc = doc.get("scale") or {}
    for key in ("bulk", "small", "many"):
        for l in sc.get(key, []) or []:
            name = f"scale {key} " + " ".join(f"{k}={l[k]}" for k in ("op", "clients") if k in l)
            for v in ("gbps", "ops_per_sec"):
                if v in l: rows[f"{name} {v}"] = (l[v], v)
    return rows
names = list(lines(runs["A"][0]).keys())
print(f"{'line':60} {'A median':>12} {'B median':>12} {'B/A':>6}  A runs / B runs")
for n in names:
    a = [lines(d).get(n, (None,))[0] for d in runs["A"]]
    b = [lines(d).get(n, (None,))[0] for d in runs["B"]]
    a = [x for x in a if x is not None]; b = [x for x in b if x is not None]
    if not a or not b: continue
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = mb / ma if ma else float("nan")
    fmt = lambda v: ",".join(f"{x:.4g}" for x in v)
    print(f"{n[:60]:60} {ma:12.4g} {mb:12.4g} {ratio:6.3f}  {fmt(a)} / {fmt(b)}")
PY
