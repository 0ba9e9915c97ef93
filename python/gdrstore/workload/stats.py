"""Percentiles of a workload's latencies, as every workload reports them."""

from typing import Dict, Sequence


def percentiles(values: Sequence[float]) -> Dict[str, float]:
    """p50, p90, p99 and max of `values` (nearest rank); zeros for none."""
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0, "count": 0}
    v = sorted(values)
    n = len(v)

    def at(q: float) -> float:
        return v[min(n - 1, max(0, int(q * n + 0.999999) - 1))]

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": v[-1], "count": n}
