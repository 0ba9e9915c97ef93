"""The training workload's figures as DLIO computes them (dlio_benchmark/utils/statscounter.py):
AU and samples/s of one rank's epoch from its per-step log, a run's figures over ranks and
epochs, and the AU a simple model of shared read bandwidth predicts (what the search for the
most accelerators checks its runs against)."""

import statistics
from typing import Any, Dict, List, Sequence, Tuple

from .models import TrainModel

# What each step's entry in a rank's log holds: seconds from the rank's origin when it asked
# for the batch, seconds it waited for it, seconds of compute, seconds from the origin when
# its compute ended.
LOG_FIELDS = ("begin_s", "wait_s", "compute_s", "end_s")


def dlio_epoch_metrics(start_s: float, end_s: float, steps: Sequence[Sequence[float]],
                       batch: int) -> Tuple[float, float]:
    """(AU, samples/s) of one rank's epoch as DLIO's StatsCounter computes them
    (dlio_benchmark/utils/statscounter.py, compute_metrics_train, metric_exclude_start_steps
    1): the compute of every step but the first over the epoch's time less the first step's
    (its load and compute: DLIO's proc, from the step's start to its compute's end), and
    (steps - 2) batches over that time. `steps` holds LOG_FIELDS of each step."""
    compute = sum(s[2] for s in steps[1:])
    measured = end_s - start_s - (steps[0][3] - steps[0][0])
    if measured <= 0:
        return 0.0, 0.0
    return (compute / measured if compute > 0 else 0.0,
            (len(steps) - 2) * batch / measured)


def predicted_au(model: TrainModel, bandwidth: float, ranks: int) -> float:
    """AU when the dataset's one shared read bandwidth (bytes/s) is split evenly over `ranks`
    accelerators and loading overlaps compute fully: compute / max(compute, batch bytes / share)."""
    need = model.sample_bytes * model.batch
    if model.compute_s == 0:
        return 0.0 if need > 0 else 1.0
    load = need / (bandwidth / ranks) if bandwidth > 0 else 0.0
    return model.compute_s / max(model.compute_s, load)


def run_summary(m: TrainModel, per_rank: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One run's figures as DLIO's StatsCounter.end_run forms them: per epoch, the ranks' mean
    AU and summed samples/s; the run's, their mean (and population stdev) over the epochs;
    MiB/s as samples/s x record_length_bytes / 2^20."""
    epochs = len(per_rank[0]["au_per_epoch"])
    au = [statistics.fmean(r["au_per_epoch"][e] for r in per_rank) for e in range(epochs)]
    rate = [sum(r["samples_per_s_per_epoch"][e] for r in per_rank) for e in range(epochs)]
    mib = m.sample_bytes / (1 << 20)
    return {"au": statistics.fmean(au), "au_stdev": statistics.pstdev(au),
            "au_per_epoch": au, "au_min_rank": min(r["au"] for r in per_rank),
            "samples_per_s": statistics.fmean(rate), "samples_per_s_stdev":
            statistics.pstdev(rate), "samples_per_s_per_epoch": rate,
            "mib_per_s": statistics.fmean(rate) * mib,
            "mib_per_s_stdev": statistics.pstdev(rate) * mib}
