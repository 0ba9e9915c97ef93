"""`train --find-max-accelerators`: the most accelerators (ranks) whose mean AU reaches the
model's threshold on this storage, found as an MLPerf Storage submitter finds the figure it
reports: raising the accelerator count until AU fails. Each N tried is one whole train run;
the AU curve (every N, its mean AU, pass or fail) is the result, with the run at the answer."""

import math
import time
from dataclasses import replace
from typing import Any, Dict, List, Optional

from ..errors import DeadlineExceeded, Error, InvalidArgument
from . import report, train
from .cleanup import add_note
from .models import TrainModel

WORKLOAD = "train-search"
DEFAULT_CAP = 64
MAX_CAP = 1024  # train.run's own limit on ranks
METHOD = ("exponential then binary: N doubles from the first N until a run's mean AU fails "
          "the threshold or N reaches the cap, then the gap between the largest passing and "
          "the smallest failing N is halved until they are adjacent; this assumes AU does not "
          "rise with N (each accelerator's share of the storage only shrinks)")


def check(cfg: train.TrainConfig, cap: int) -> None:
    """Refuses a search that cannot mean anything, naming the option."""
    if not 1 <= cap <= MAX_CAP:
        raise InvalidArgument(f"--max-accelerators {cap} is outside [1, {MAX_CAP}]")
    if not 1 <= cfg.ranks <= cap:
        raise InvalidArgument(f"--ranks {cfg.ranks} (the search's first N) is outside "
                              f"[1, --max-accelerators {cap}]")
    if cfg.keep:
        # Every N tried lays out its own dataset under the same names; keeping one would make
        # the next run's volumes collide with it.
        raise InvalidArgument("--keep cannot be given with --find-max-accelerators (each N "
                              "tried makes its own dataset); rerun the answer's N with --keep")
    if not (math.isfinite(cfg.deadline_s) and cfg.deadline_s > 0):
        raise InvalidArgument(f"--deadline {cfg.deadline_s:g} is not a positive number of "
                              "seconds")


def predicted_max(model: TrainModel, bandwidth: float, cap: int) -> int:
    """The largest N <= cap whose train.predicted_au on one shared read bandwidth (bytes/s)
    reaches the model's threshold; 0 when not even one accelerator does."""
    best = 0
    for n in range(1, cap + 1):
        if train.predicted_au(model, bandwidth, n) < model.au_threshold:
            break  # the prediction only falls as N rises
        best = n
    return best


def run(cfg: train.TrainConfig, cap: Optional[int] = None) -> Dict[str, Any]:
    """Searches N from cfg.ranks up to `cap` (default 64) within cfg.deadline_s for the whole
    search; the result as docs/workloads.md describes it. A run that fails ends the search
    with its error, a note on it saying what the search had found so far."""
    cap = DEFAULT_CAP if cap is None else cap
    check(cfg, cap)
    threshold = cfg.model.au_threshold
    t0 = time.monotonic()
    end = t0 + cfg.deadline_s
    curve: List[Dict[str, Any]] = []
    best: Dict[str, Any] = {}

    def passes(n: int) -> bool:
        left = end - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"--find-max-accelerators ran past its deadline of "
                                   f"{cfg.deadline_s:g} s before trying N={n}; "
                                   f"{_so_far(curve)}")
        try:
            r = train.run(replace(cfg, ranks=n, deadline_s=left))
        except Error as e:
            add_note(e, f"during --find-max-accelerators, at N={n}; {_so_far(curve)}")
            raise
        ok = r["au_mean"] >= threshold
        curve.append({"ranks": n, "au_mean": r["au_mean"], "passed": ok,
                      "run_passed": r.get("passed"), "samples_per_s": r.get("samples_per_s"),
                      "mib_per_s": r.get("mib_per_s"), "read_gb_per_s": r.get("read_gb_per_s"),
                      "wall_s": r.get("wall_s")})
        if ok and n > best.get("ranks", 0):
            best.clear()
            best.update(r)
        return ok

    lo, hi = 0, None  # the largest N seen passing (0: none), the smallest seen failing
    n = cfg.ranks
    while True:
        if not passes(n):
            hi = n
            break
        lo = n
        if n == cap:
            break
        n = min(2 * n, cap)
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return {
        "workload": WORKLOAD, "model": cfg.model.name, "method": METHOD,
        "au_threshold": threshold, "first_n": cfg.ranks, "cap": cap,
        "max_accelerators": lo, "first_failing": hi, "capped": hi is None,
        "passed": lo > 0, "curve": curve, "at_max": best or None,
        "wall_s": time.monotonic() - t0,
    }


def _so_far(curve: List[Dict[str, Any]]) -> str:
    if not curve:
        return "no N had been tried"
    tried = ", ".join(f"N={p['ranks']} {'passed' if p['passed'] else 'failed'} at mean AU "
                      f"{p['au_mean'] * 100:.2f} %" for p in curve)
    return f"tried so far: {tried}"


def table(r: Dict[str, Any]) -> str:
    """The AU curve in the order tried, the answer, then the table of the run at the answer."""
    lines = [f"train {r['model']} --find-max-accelerators: mean AU against "
             f"{r['au_threshold'] * 100:.0f} %, N from {r['first_n']} up to {r['cap']}",
             f"  {'N':>5} {'mean AU %':>10} {'verdict':>8} {'samples/s':>10} {'MiB/s':>10}"]
    for p in r["curve"]:
        lines.append(f"  {p['ranks']:>5} {p['au_mean'] * 100:>10.2f} "
                     f"{'PASS' if p['passed'] else 'FAIL':>8} {p['samples_per_s'] or 0:>10.1f} "
                     f"{p['mib_per_s'] or 0:>10.1f}")
    if r["max_accelerators"] == 0:
        answer = "no N passes: not even one accelerator reaches the threshold"
    elif r["capped"]:
        answer = (f"{r['max_accelerators']} accelerators pass, the cap (--max-accelerators): "
                  "the storage may feed more")
    else:
        answer = (f"{r['max_accelerators']} accelerators pass, {r['first_failing']} fail")
    lines.append(f"  largest passing N: {answer}; {len(r['curve'])} runs in {r['wall_s']:.1f} s")
    text = "\n".join(lines) + "\n"
    if r["at_max"]:
        text += f"the run at N={r['max_accelerators']}:\n" + report.table(r["at_max"])
    return text


def plots(r: Dict[str, Any], out_dir: str) -> List[str]:
    """search.png (mean AU against N, the threshold and the answer marked) and the run at the
    answer's own plots; [] and a reason in r["plots_skipped"] without matplotlib."""
    plt = report.pyplot(r)
    if plt is None:
        return []
    fig, ax = plt.subplots(figsize=(8, 4))
    points = sorted(r["curve"], key=lambda p: p["ranks"])
    ax.plot([p["ranks"] for p in points], [p["au_mean"] * 100 for p in points], color="grey")
    for ok, colour, label in ((True, "green", "pass"), (False, "red", "fail")):
        mine = [p for p in points if p["passed"] == ok]
        ax.scatter([p["ranks"] for p in mine], [p["au_mean"] * 100 for p in mine],
                   color=colour, label=label, zorder=3)
    ax.axhline(r["au_threshold"] * 100, color="red", linestyle="--", label="threshold")
    if r["max_accelerators"]:
        ax.axvline(r["max_accelerators"], color="green", linestyle=":",
                   label=f"largest passing N = {r['max_accelerators']}")
    ax.set_xticks([p["ranks"] for p in points])
    ax.set_xlabel("accelerators (N)")
    ax.set_ylabel("mean AU %")
    ax.set_title(f"{r['model']}: mean AU against accelerators")
    ax.legend()
    made = [report._save(fig, plt, out_dir, "search.png")]
    if r["at_max"]:
        made += report.plots(r["at_max"], out_dir)
    return made
