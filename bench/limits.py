#!/usr/bin/env python3
"""bench/limits.sh's helper: the pinned-copy baselines (torch) and the table of issue 45's targets.

  limits.py copies --gpus 0,1,2,3 --size 1GiB --repeats 5 [--batch K] --out FILE
      one process per GPU, all started together; each round every process copies SIZE
      host->GPU (pinned) K times back to back, then after a barrier GPU->host; a round's
      aggregate is all the bytes over the window from the first start to the last end
      (CLOCK_MONOTONIC, which processes share). Median of the rounds. Needs torch with CUDA.
  limits.py report OUT_DIR
      reads what each part left in OUT_DIR (its raw JSON, or partN.skip / partN.status) and
      prints one table: target, product, baseline (same run), ratio, aim, met; writes
      OUT_DIR/limits.json.
"""

import argparse
import json
import multiprocessing as mp
import os
import re
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

GB = 1e9


def parse_size(text: str) -> int:
    units = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u in sorted(units, key=len, reverse=True):
        if u and text.endswith(u):
            n, mul = text[:-len(u)], units[u]
            break
    else:
        n, mul = text, 1
    if not n.isdigit() or int(n) <= 0:
        raise argparse.ArgumentTypeError(f"size '{text}' is not N, NKiB, NMiB or NGiB (N > 0)")
    return int(n) * mul


def _copier(gpu: int, size: int, repeats: int, batch: int, barrier, out) -> None:
    """One GPU's process: `repeats` rounds of `batch` back-to-back pinned copies each way, each
    between barriers, so every GPU's copies of a round run at the same time as the others'."""
    import torch
    torch.cuda.set_device(gpu)
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(size, dtype=torch.uint8, device=f"cuda:{gpu}")
    for _ in range(2):  # warm: the first copies map the buffers into the GPU's address space
        dev.copy_(host, non_blocking=True)
        host.copy_(dev, non_blocking=True)
    torch.cuda.synchronize()
    rounds: List[Dict[str, List[float]]] = []
    for _ in range(repeats):
        one = {}
        for way in ("h2d", "d2h"):
            barrier.wait(120)
            t0 = time.monotonic()
            for _ in range(batch):
                if way == "h2d":
                    dev.copy_(host, non_blocking=True)
                else:
                    host.copy_(dev, non_blocking=True)
            torch.cuda.synchronize()
            one[way] = [t0, time.monotonic()]
        rounds.append(one)
    out.put((gpu, rounds))


def copies(gpus: List[int], size: int, repeats: int, batch: int) -> Dict[str, Any]:
    ctx = mp.get_context("spawn")  # CUDA cannot be used in a forked child
    barrier = ctx.Barrier(len(gpus))
    out = ctx.Queue()
    procs = [ctx.Process(target=_copier, args=(g, size, repeats, batch, barrier, out))
             for g in gpus]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=300) for _ in procs)
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"the copy process of a GPU exited {p.exitcode}")
    res: Dict[str, Any] = {"gpus": gpus, "size": size, "repeats": repeats, "batch": batch}
    moved = size * batch
    for way in ("h2d", "d2h"):
        agg, per_gpu = [], {g: [] for g in gpus}
        for r in range(repeats):
            spans = [got[g][r][way] for g in gpus]
            agg.append(len(gpus) * moved / (max(e for _, e in spans) - min(s for s, _ in spans))
                       / GB)
            for g in gpus:
                s, e = got[g][r][way]
                per_gpu[g].append(moved / (e - s) / GB)
        res[way] = {"gbps": statistics.median(agg), "samples": agg,
                    "per_gpu_gbps": {str(g): statistics.median(v) for g, v in per_gpu.items()}}
    return res


# ---- the report ------------------------------------------------------------------------------

def _load(path: str) -> Optional[Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _row(target: str, product: Optional[float], baseline: Optional[float], aim: str,
         unit: str, note: str = "") -> Dict[str, Any]:
    ratio = product / baseline if product is not None and baseline else None
    op, bound = aim.split()
    met = None
    if ratio is not None:
        met = ratio >= float(bound) if op == ">=" else ratio <= float(bound)
    return {"target": target, "unit": unit, "product": product, "baseline": baseline,
            "ratio": ratio, "aim": aim, "met": met, "note": note}


def _part1(out: str, rows: List[Dict[str, Any]]) -> None:
    ck, cp = _load(f"{out}/part1-checkpoint.json"), _load(f"{out}/part1-copies.json")
    if ck is None or cp is None:
        raise ValueError("part1-checkpoint.json or part1-copies.json missing or not JSON")
    n = len(cp["gpus"])
    gpus = f"{n} GPU{'s' if n > 1 else ''}"
    fewer = "" if n >= 4 else f"; the aims are for 4 GPUs, this run had {n}"
    for phase, way, name in (("read", "h2d", "restore"), ("write", "d2h", "save")):
        p = ck[phase]
        # The checkpoint's bytes over its slowest rank's time: every rank starts at the
        # barrier, so this is the aggregate over the whole checkpoint's window.
        agg = statistics.median(c["bytes"] / c["duration_s"] / GB for c in p["per_checkpoint"])
        rows.append(_row(f"1 {name}, {gpus}, all ranks vs {n} pinned "
                         f"{'H2D' if way == 'h2d' else 'D2H'} at once", agg, cp[way]["gbps"],
                         ">= 0.9", "GB/s",
                         f"median of {len(p['per_checkpoint'])} checkpoints{fewer}"))
        # Each rank's rate (its bytes over its own time); per checkpoint the slowest against
        # the mean of the ranks, then the median over the checkpoints.
        ranks = ck["per_rank"][phase]
        slow, mean = [], []
        for k in range(len(p["per_checkpoint"])):
            rates = [r["checkpoints"][k]["bytes"] / r["checkpoints"][k]["seconds"] / GB
                     for r in ranks]
            slow.append(min(rates))
            mean.append(statistics.fmean(rates))
        i = sorted(range(len(slow)), key=lambda k: slow[k] / mean[k])[len(slow) // 2]
        rows.append(_row(f"1 {name}, {gpus}, slowest rank vs ranks' mean", slow[i],
                         mean[i], ">= 0.85", "GB/s",
                         f"{len(ranks)} ranks, the median checkpoint by this ratio{fewer}"))


def _gdr_rows(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {r["name"]: r for r in doc.get("rows", [])}


def _part2(out: str, rows: List[Dict[str, Any]]) -> None:
    doc = _load(f"{out}/part2-lat-rate.json")
    if doc is None:
        raise ValueError("part2-lat-rate.json missing or not JSON")
    got = _gdr_rows(doc)
    # By unit and words, not the whole name: the latency group's names may grow qualifiers.
    lat = next((r for n, r in got.items() if r["unit"] == "us" and "unary qd1 p50" in n
                and "daemon" not in n), None)
    rate = next((r for n, r in got.items() if r["unit"] == "ops/s" and "stream qd32" in n
                 and "batch" not in n), None)
    if lat is None or rate is None:
        raise ValueError(f"gdr_bench printed no unary p50 or stream qd32 line: {sorted(got)}")
    rows.append(_row("2 4 KiB unary p50 vs empty RPC (Ping) p50", lat["product"],
                     lat["baseline"], "<= 1.3", "us", lat["name"]))
    rows.append(_row("2 4 KiB Stream qd 32 vs unary qd 32", rate["product"], rate["baseline"],
                     ">= 3", "ops/s", rate["name"]))
    # gRPC's own round trip on this host (a bare in-process server): the floor under both.
    floor = next((r for n, r in got.items() if r["unit"] == "us" and n.startswith("Ping RPC")),
                 None)
    if floor is not None:
        rows.append(_info("2 (info) Ping p50 vs a bare gRPC server's Ping p50", floor["product"],
                          floor["baseline"], "us", floor["baseline_name"]))
    # The same Stream at most N ops a message (gdr_bench --stream-batch): info beside the target.
    split = {int(m.group(1)): r for n, r in got.items()
             if (m := re.search(r"stream qd32 batch(\d+)$", n)) and r["unit"] == "ops/s"}
    for ops, r in sorted(split.items()):
        rows.append(_info(f"2 (info) the same, at most {ops} ops a message", r["product"],
                          r["baseline"], "ops/s", r["name"]))
    calls = {int(m.group(1)): r for n, r in got.items()
             if (m := re.search(r"stream qd32 calls(\d+)$", n)) and r["unit"] == "ops/s"}
    for n, r in sorted(calls.items()):
        rows.append(_info(f"2 (info) the same Stream over {n} call{'s' if n > 1 else ''}",
                          r["product"], r["baseline"], "ops/s", r["name"]))


def _part3(out: str, rows: List[Dict[str, Any]]) -> None:
    doc = _load(f"{out}/part3-scale.json")
    if doc is None:
        raise ValueError("part3-scale.json missing or not JSON")
    small = {s["clients"]: s["ops_per_sec"] for s in doc["scale"]["small"]}
    if 8 not in small or 16 not in small:
        raise ValueError(f"no 8- and 16-client small-op lines: {sorted(small)}")
    rows.append(_row("3 4 KiB ops/s, 16 clients vs 8 clients", small[16], small[8], ">= 1.0",
                     "ops/s", "Stream qd 32 per client"))


def _part4(out: str, rows: List[Dict[str, Any]]) -> None:
    doc = _load(f"{out}/part4-scale-gpu.json")
    if doc is None:
        raise ValueError("part4-scale-gpu.json missing or not JSON")
    g = doc["scale"]["gpu"]
    if "skipped" in g:
        raise ValueError(f"gdr_bench skipped its GPU line: {g['skipped']}")
    rows.append(_row("4 8 clients tcp Write, GPU vs host memory", g["gbps"],
                     g["host_gbps"], ">= 0.9", "GB/s", g["gpu"]))


def _part5(out: str, rows: List[Dict[str, Any]]) -> None:
    cp = _load(f"{out}/part5-copies.json")
    if cp is None:
        raise ValueError("part5-copies.json missing or not JSON")
    for qd in (1, 2):
        runs = [r for r in (_load(f"{out}/part5-local-qd{qd}-{i}.json") for i in range(3)) if r]
        if not runs:
            raise ValueError(f"no gdrctl bench result for qd {qd}")
        gbps = statistics.median(r["gbps"] for r in runs)
        note = f"{runs[0]['path']}, median of {len(runs)} runs"
        if qd == 1:
            rows.append(_row("5 local 64 MiB gets to GPU qd 1 vs pinned copy", gbps,
                             cp["h2d"]["gbps"], ">= 0.9", "GB/s", note))
            # Where a qd-1 op's time goes: the client's p50 against the daemon's own time
            # (admitted -> answered, the copy inside) and against one pinned copy's time.
            lat = [r["lat_us"]["p50"] for r in runs if "service_us" in r]
            svc = [r["service_us"]["p50"] for r in runs if "service_us" in r]
            if lat:
                copy_us = 64 * 2**20 / (cp["h2d"]["gbps"] * 1e9) * 1e6
                rows.append(_info("5 (info) qd 1 op p50 vs the daemon's time p50",
                                  statistics.median(lat), statistics.median(svc), "us",
                                  f"a pinned 64 MiB copy: {copy_us:.0f} us"))
        else:  # what more in flight gives, beside the target (the 0.94x)
            rows.append(_info("5 (info) the same at qd 2", gbps, cp["h2d"]["gbps"], "GB/s",
                              note))


def _info(target: str, product: float, baseline: float, unit: str,
          note: str) -> Dict[str, Any]:
    return {"target": target, "unit": unit, "product": product, "baseline": baseline,
            "ratio": product / baseline if baseline else None, "aim": "info", "met": None,
            "note": note}


PARTS = [("1", _part1), ("2", _part2), ("3", _part3), ("4", _part4), ("5", _part5)]


def _fmt(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 1000 else f"{v:.3f}" if v < 10 else f"{v:.1f}"


def report(out: str) -> int:
    rows: List[Dict[str, Any]] = []
    parts: Dict[str, Dict[str, Any]] = {}
    for name, fn in PARTS:
        skip, status = _read(f"{out}/part{name}.skip"), _read(f"{out}/part{name}.status")
        if skip:
            parts[name] = {"state": "skip", "why": skip}
            continue
        if status and status not in ("ok", "skipped"):
            parts[name] = {"state": "fail", "why": status}
            continue
        try:
            before = len(rows)
            fn(out, rows)
            parts[name] = {"state": "ok", "rows": len(rows) - before}
        except ValueError as e:  # what a part's output lacks, said by its parser
            parts[name] = {"state": "fail", "why": str(e)}
        except (KeyError, TypeError, ZeroDivisionError, StopIteration) as e:
            parts[name] = {"state": "fail", "why": f"its output did not parse: {e!r}"}
    print(f"{'target':<52} {'unit':>5} {'product':>9} {'baseline':>9} {'ratio':>6} "
          f"{'aim':>7}  met")
    for r in rows:
        met = "-" if r["met"] is None else "yes" if r["met"] else "NO"
        print(f"{r['target']:<52} {r['unit']:>5} {_fmt(r['product']):>9} "
              f"{_fmt(r['baseline']):>9} {_fmt(r['ratio']):>6} {r['aim']:>7}  {met}")
    for name, p in parts.items():
        if p["state"] != "ok":
            print(f"part {name}: {p['state'].upper()}: {p['why']}")
    notes = [f"  {r['target']}: {r['note']}" for r in rows if r["note"]]
    if notes:
        print("notes:\n" + "\n".join(notes))
    with open(f"{out}/limits.json", "w") as f:
        json.dump({"rows": rows, "parts": parts}, f, indent=1)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("copies")
    c.add_argument("--gpus", required=True, help="CUDA ordinals, comma-separated")
    c.add_argument("--size", type=parse_size, default=1 << 30)
    c.add_argument("--repeats", type=int, default=5)
    c.add_argument("--batch", type=int, default=1, help="back-to-back copies in a round")
    c.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("out")
    a = p.parse_args()
    if a.cmd == "report":
        return report(a.out)
    try:
        gpus = [int(g) for g in a.gpus.split(",")]
    except ValueError:
        p.error(f"--gpus '{a.gpus}' is not a comma-separated list of CUDA ordinals")
    if not 1 <= a.repeats <= 1000:
        p.error(f"--repeats {a.repeats} is outside [1, 1000]")
    if not 1 <= a.batch <= 1000:
        p.error(f"--batch {a.batch} is outside [1, 1000]")
    res = copies(gpus, a.size, a.repeats, a.batch)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"pinned copies, {len(gpus)} GPU(s) at once, {a.size} B: H2D {res['h2d']['gbps']:.2f}"
          f" GB/s, D2H {res['d2h']['gbps']:.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
