"""Percentiles of a workload's latencies, as every workload reports them."""

import math
from typing import Dict, List, Sequence


def percentiles(values: Sequence[float]) -> Dict[str, float]:
    """p50, p90, p99 and max of `values` (nearest rank); zeros for none."""
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0, "count": 0}
    v = sorted(values)
    n = len(v)

    def at(q: float) -> float:
        return v[min(n - 1, max(0, int(q * n + 0.999999) - 1))]

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": v[-1], "count": n}


def percentile(values: List[float], q: float) -> float:
    """The q-th percentile with linear interpolation between ranks (numpy's default, which
    MLPerf Storage's KV-cache benchmark uses; `percentiles` above is nearest rank)."""
    v = sorted(values)
    x = (len(v) - 1) * q / 100.0
    lo = math.floor(x)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (x - lo)
