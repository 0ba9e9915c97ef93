"""A workload's result as a person reads it: a table of the figures MLPerf reports, and PNG
plots (Debian's matplotlib, no display needed). The JSON stays the record; these are views."""

import os
from typing import Any, Dict, List

from . import checkpoint, kvcache_mlperf


def _gb(n: float) -> str:
    return f"{n / 1e9:.3f} GB"


def table(r: Dict[str, Any]) -> str:
    lines: List[str] = []
    w = r["workload"]
    how = [f"--scale {r.get('scale', 1):g}"] if r.get("scale", 1) != 1 else []
    if r.get("steps_limit") is not None:
        how.append(f"--steps {r['steps_limit']}")
    scaled = f" (scaled down: {', '.join(how)})" if r.get("scaled") else ""
    if w == "train":
        p = r["parameters"]
        lines.append(f"train {r['model']}: {r['ranks']} accelerators, compute {r['compute']}, "
                     f"{r['files']} files, {r['samples']} samples, {_gb(r['dataset_bytes'])}"
                     f"{scaled}")
        lines.append(f"  batch {p['batch']}, compute {p['compute_s']} s/step, {p['loader']} "
                     f"loader, read threads {p['read_threads']}; {r['epochs']} epochs of "
                     f"{r['steps_per_epoch']} steps; needs "
                     f"{r['needed_gb_per_s_per_rank'] or 0:.3f} GB/s per accelerator")
        if not r["closed"]:
            lines.append("  not closed: " + "; ".join(r["deviations"]))
        lines.append(f"  {'rank':>4} {'device':>8} {'steps':>6} {'AU %':>7} {'samples/s':>10} "
                     f"{'GB/s':>8} {'wait p50 ms':>12} {'wait p99 ms':>12}")
        for x in r["per_rank"]:
            wp = x["wait_percentiles_ms"]
            lines.append(f"  {x['rank']:>4} {x['device']:>8} {x['steps']:>6} {x['au'] * 100:>7.2f} "
                         f"{x['samples_per_s']:>10.1f} {x['read_gb_per_s']:>8.3f} "
                         f"{wp['p50']:>12.2f} {wp['p99']:>12.2f}")
        verdict = "PASS" if r["passed"] else "FAIL"
        over = f"{len(r['runs'])} runs" if len(r["runs"]) > 1 else "epochs"
        lines.append(f"  AU {r['au'] * 100:.2f} +- {r['au_stdev'] * 100:.2f} % (mean over ranks "
                     f"and {over}; lowest rank {r['au_min_rank'] * 100:.2f} %) against "
                     f"{p['au_threshold'] * 100:.0f} %: {verdict}; {r['samples_per_s']:.1f} "
                     f"+- {r['samples_per_s_stdev']:.1f} samples/s, {r['mib_per_s']:.1f} +- "
                     f"{r['mib_per_s_stdev']:.1f} MiB/s")
    elif w == "checkpoint":
        lines.extend(checkpoint.table(r))
    elif w == "kvcache" and "option" in r:  # an MLPerf Storage v3 option's run
        lines.extend(kvcache_mlperf.table_lines(r))
    elif w == "kvcache":
        p = r["parameters"]
        g, l = r["get_ms"], r["prefix_load_ms"]
        lines.append(f"kvcache {r['model']}: {r['ranks']} instances x {p['requests_per_rank']} "
                     f"requests, {p['block_bytes'] >> 10} KiB blocks of {p['block_tokens']} "
                     f"tokens, {p['prefixes']} prefixes (zipf {p['zipf']:g}), capacity "
                     f"{p['capacity_blocks']} blocks")
        lines.append(f"  hit rate {r['hit_rate'] * 100:.1f} % of blocks, "
                     f"{r['reused_token_fraction'] * 100:.1f} % of tokens reused, "
                     f"{r['evictions']} evictions")
        lines.append(f"  block get ms p50 {g['p50']:.3f} p90 {g['p90']:.3f} p99 {g['p99']:.3f}; "
                     f"prefix load before first token ms p50 {l['p50']:.3f} p99 {l['p99']:.3f}; "
                     f"{r['get_gb_per_s']:.3f} GB/s")
    return "\n".join(lines) + "\n"


def plots(r: Dict[str, Any], out_dir: str) -> List[str]:
    """PNG files written under `out_dir`; [] and a reason in r["plots_skipped"] without
    matplotlib."""
    plt = pyplot(r)
    if plt is None:
        return []
    made = []
    w = r["workload"]
    if w == "train":
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        ranks = [x["rank"] for x in r["per_rank"]]
        a1.bar(ranks, [x["au"] * 100 for x in r["per_rank"]])
        a1.axhline(r["parameters"]["au_threshold"] * 100, color="red", linestyle="--",
                   label="threshold")
        a1.set_xlabel("rank")
        a1.set_ylabel("AU %")
        a1.set_title(f"{r['model']}: accelerator utilisation")
        a1.legend()
        for x in r["per_rank"]:
            a2.plot(x["step_begin_s"], [v * 1e3 for v in x["step_wait_s"]], label=f"rank {x['rank']}")
        a2.set_xlabel("run time (s)")
        a2.set_ylabel("wait for data (ms)")
        a2.set_title("time each step waited for its batch")
        if len(ranks) <= 8:
            a2.legend()
        made.append(_save(fig, plt, out_dir, "train.png"))
    elif w == "checkpoint":
        made.append(checkpoint.plot(r, plt, lambda fig, name: _save(fig, plt, out_dir, name)))
    elif w == "kvcache":
        fig, ax = plt.subplots(figsize=(8, 4))
        for name, vals in r["latencies_ms"].items():
            if vals:
                v = sorted(vals)
                ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], label=name)
        ax.set_xscale("log")
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction")
        ax.set_title(f"{r['model']} KV cache: latency CDF")
        ax.legend()
        made.append(_save(fig, plt, out_dir, "kvcache.png"))
    return made


def pyplot(r: Dict[str, Any]):
    """matplotlib.pyplot drawing to files (no display needed), or None with the reason in
    r["plots_skipped"]."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        r["plots_skipped"] = f"matplotlib is not importable: {e}"
        return None
    return plt


def _save(fig, plt, out_dir: str, name: str) -> str:
    """Writes `fig` as out_dir/name (the directory made if missing); its path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
