"""MLPerf Storage's training workloads as DLIO runs them (branch mlperf_storage_v2.0, which
mlcommons/storage pins), against gdrstored volumes and into the accelerators' memory. A rank is
one simulated accelerator. Each epoch it reads its share of the dataset through DLIO's loader:
PyTorch's DataLoader (unet3d: a contiguous block of samples per rank, shuffled within it,
`read_threads` workers with `prefetch_factor` batches each) or the TFRecord pipeline (resnet50,
cosmoflow: the rank's record files read sequentially, `read_threads` at a time, through the
shuffle buffer). It emulates each step's compute and waits at a barrier with every other rank
after each step, DLIO's stand-in for the allreduce, so one slow rank stalls all. AU, samples/s
and MiB/s are computed per epoch as DLIO's StatsCounter does (the first step dropped), and the
run passes on the mean AU over ranks and epochs. The dataset's default size is mlpstorage's
closed datasize rule for the client's memory; a dataset past what the daemons can hold in
memory is served by repeating volumes (`repeat`); every departure from the closed rules is named
in the result. Here: the configuration, the dataset's layout, each rank's epochs and the run;
DLIO's sample order is dlio_sampler.py's, the loader's workers loader.py's, and the figures
train_metrics.py's (their public names importable from here too)."""

import math
import os
import random
import statistics
import time
from dataclasses import dataclass, fields, replace
from threading import BrokenBarrierError
from typing import Any, Dict, List, Optional, Tuple

from ..errors import Aborted, InvalidArgument
from . import ranks as rank_runner
from .cleanup import closing
from .device import rank_accelerator, ranks_per_gpu
from .dlio_sampler import dlio_rank_samples, dlio_tfrecord_records
from .loader import Pool, TFRecordLoader, TorchLoader, pool_slots, prefetch_factor, warm
from .models import TRAIN, TrainModel
from .repeat import make_dataset, repeated
from .stats import percentiles
from .target import Target, Volumes
from .train_metrics import LOG_FIELDS, dlio_epoch_metrics, run_summary
from .train_metrics import predicted_au  # noqa: F401 (train.predicted_au: search's, tests')

_ALIGN = 4096         # samples start on 4 KiB in a file, as files do on a file system
_PIECE = 64 << 20     # a sample is read in gets of at most this (and the daemon's largest op)

# MLPerf Storage's closed rules for training (mlpstorage's calculate_training_data_size, and
# the configs' train.epochs).
CLOSED_EPOCHS = 5
CLOSED_MEMORY_MULTIPLE = 5   # the dataset is at least this many times the clients' memory
CLOSED_MIN_STEPS = 500       # ... and at least this many steps an epoch
# Fields a closed run may change (the submission guidelines' parameters a submitter may set:
# reader.read_threads, computation_threads, prefetch_size; the dataset's file count is the
# datasize rule's, judged on its own).
_CLOSED_OPEN_FIELDS = ("read_threads", "computation_threads", "prefetch_size", "files")


@dataclass(frozen=True)
class TrainConfig:
    model: TrainModel
    target: Target
    ranks: int = 1
    gpus: Tuple[str, ...] = ()     # rank r uses gpus[r % len]; () = host memory, sleep compute
    scale: float = 1.0             # of the closed dataset size's file count
    steps: Optional[int] = None    # per rank per epoch (None: the whole epoch)
    epochs: int = CLOSED_EPOCHS
    runs: int = 1                  # the whole run repeated on the same dataset
    seed: int = 1                  # DLIO's train.seed (+ epoch for the in-block shuffle)
    client_memory: Optional[int] = None  # bytes of RAM a client host has (None: this host's)
    client_hosts: int = 1          # hosts the ranks run on (the datasize rule sums their RAM)
    compute_skew: Tuple[float, ...] = ()  # extra compute seconds a step of rank r takes
    log_samples: bool = False      # each rank's sample indices per epoch in the result
    prefix: str = "workload"
    file: bool = False             # file-backed volumes (a writable --volume-dir)
    media: Optional[str] = None    # media options of the dataset volumes
    retries: int = 2               # of a failed sample read
    deadline_s: float = 3600.0
    keep: bool = False             # leave the dataset's volumes on the daemons
    # Bytes of memory each dataset volume holds, seen again every `repeat` bytes (a repeating
    # volume); None: only when a daemon cannot hold the dataset in memory; 0: never.
    repeat: Optional[int] = None


def model_with(name: str, **overrides) -> TrainModel:
    """The published model `name` with the given fields replaced (None: kept)."""
    if name not in TRAIN:
        raise InvalidArgument(f"--model {name!r} is not one of {', '.join(TRAIN)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    m = replace(TRAIN[name], **given)
    for f in ("sample_bytes", "samples_per_file", "files", "batch"):
        if not 0 < getattr(m, f) < (1 << 40):
            raise InvalidArgument(f"{f} {getattr(m, f)} is outside [1, 2^40)")
    for f in ("read_threads", "computation_threads"):  # threads of every rank
        if not 0 < getattr(m, f) <= 1024:
            raise InvalidArgument(f"{f} {getattr(m, f)} is outside [1, 1024]")
    if not 0 <= m.prefetch_size <= 1024:
        raise InvalidArgument(f"prefetch_size {m.prefetch_size} is outside [0, 1024]")
    if not 0 <= m.shuffle_size <= 1 << 24:
        raise InvalidArgument(f"shuffle_size {m.shuffle_size} is outside [0, 2^24]")
    if m.loader not in ("pytorch", "tensorflow"):
        raise InvalidArgument(f"loader {m.loader!r} is neither pytorch nor tensorflow")
    if not 0 <= m.sample_stdev < (1 << 40):
        raise InvalidArgument(f"sample_stdev {m.sample_stdev} is outside [0, 2^40)")
    if not 0 <= m.compute_s <= 3600:
        raise InvalidArgument(f"compute time {m.compute_s} s is outside [0, 3600]")
    if not 0 < m.au_threshold <= 1:
        raise InvalidArgument(f"AU threshold {m.au_threshold} is outside (0, 1]")
    return m


def host_memory() -> int:
    """This host's RAM in bytes: /proc/meminfo's MemTotal, what mlpstorage sums over the
    client hosts."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def closed_dataset_files(model: TrainModel, ranks: int, client_memory: int,
                         client_hosts: int = 1) -> int:
    """The files a closed run's dataset has (mlcommons/storage mlpstorage,
    calculate_training_data_size): enough for CLOSED_MEMORY_MULTIPLE x the client hosts'
    memory, and for CLOSED_MIN_STEPS steps an epoch of every rank, whichever is more."""
    if client_memory <= 0 or client_hosts <= 0 or ranks <= 0:
        raise InvalidArgument(f"the datasize rule needs memory, hosts and ranks > 0 (got "
                              f"{client_memory} B, {client_hosts} hosts, {ranks} ranks)")
    file_bytes = model.samples_per_file * model.sample_bytes
    by_bytes = CLOSED_MEMORY_MULTIPLE * client_memory * client_hosts // file_bytes
    by_steps = CLOSED_MIN_STEPS * ranks * model.batch // model.samples_per_file
    return max(by_bytes, by_steps)


def closed_dataset_bytes(model: TrainModel, ranks: int, client_memory: int,
                         client_hosts: int = 1) -> int:
    """The closed dataset's size in bytes at the model's mean sample size (mlpstorage's
    total_disk_bytes)."""
    files = closed_dataset_files(model, ranks, client_memory, client_hosts)
    return files * model.samples_per_file * model.sample_bytes


def dataset_files(cfg: TrainConfig) -> Tuple[int, int]:
    """(the run's file count, the closed rule's): the rule's scaled by cfg.scale, grown to
    hold cfg.steps steps of every rank when they are asked for."""
    m = cfg.model
    memory = host_memory() if cfg.client_memory is None else cfg.client_memory
    rule = closed_dataset_files(m, cfg.ranks, memory, cfg.client_hosts)
    files = max(1, math.ceil(rule * cfg.scale))
    if cfg.steps is not None:  # enough samples for the steps asked
        files = max(files, math.ceil(cfg.ranks * m.batch * cfg.steps / m.samples_per_file))
    return files, rule


@dataclass(frozen=True)
class Sample:
    volume: int   # index into the layout's volumes
    offset: int
    length: int
    index: int    # of the sample in the dataset


@dataclass(frozen=True)
class Layout:
    volumes: Tuple[Tuple[str, int], ...]  # (name, size) of each dataset volume
    samples: Tuple[Sample, ...]
    files: int
    closed_files: int = 0                 # what the datasize rule asks for
    repeats: Tuple[int, ...] = ()         # each volume's repeat (0: none; (): none repeats)

    def repeat_of(self, volume: int) -> Optional[int]:
        """Volume `volume`'s repeat, or None when it holds every byte."""
        return (self.repeats[volume] or None) if self.repeats else None


def lay_out(cfg: TrainConfig) -> Layout:
    """The dataset: dataset_files(cfg) files of samples_per_file samples, sizes drawn around
    the model's mean (seeded), each file contiguous, files dealt to one volume per daemon in
    turn. Sample i is record i % samples_per_file of file i // samples_per_file, as DLIO
    numbers them."""
    m = cfg.model
    files, rule = dataset_files(cfg)
    if files * m.samples_per_file < cfg.ranks * m.batch:
        raise InvalidArgument(f"--scale {cfg.scale:g} leaves {files * m.samples_per_file} "
                              f"samples, fewer than one step of {cfg.ranks} ranks x batch "
                              f"{m.batch}")
    rng = random.Random(cfg.seed)
    low = max(_ALIGN, m.sample_bytes - 2 * m.sample_stdev)
    high = m.sample_bytes + 2 * m.sample_stdev
    nvol = cfg.target.places
    sizes = [0] * nvol
    samples: List[Sample] = []
    for f in range(files):
        v = f % nvol
        for _ in range(m.samples_per_file):
            n = m.sample_bytes
            if m.sample_stdev:
                n = int(min(high, max(low, rng.gauss(m.sample_bytes, m.sample_stdev))))
            samples.append(Sample(v, sizes[v], n, len(samples)))
            sizes[v] += (n + _ALIGN - 1) // _ALIGN * _ALIGN
    names = tuple((f"{cfg.prefix}-train-{cfg.model.name}-{v}", max(sizes[v], _ALIGN))
                  for v in range(nvol))
    return Layout(names, tuple(samples), files, rule)


@dataclass(frozen=True)
class EpochPlan:
    """What one rank does in one epoch: its batches, and (TFRecord) the records it reads, as
    (reader, sample index) in read order, which include records no batch of it takes."""
    batches: Tuple[Tuple[int, ...], ...]
    reads: Tuple[Tuple[int, int], ...] = ()


def _tf_records(layout: Layout, cfg: TrainConfig, rank: int):
    m = cfg.model
    return dlio_tfrecord_records(layout.files, m.samples_per_file, cfg.ranks, rank,
                                 m.read_threads, m.shuffle_size if m.sample_shuffle else 0,
                                 cfg.seed, m.file_shuffle)


def steps_per_epoch(layout: Layout, cfg: TrainConfig) -> int:
    """DLIO's steps an epoch (floor(samples / batch / ranks)), no more than every rank's share
    holds in whole batches (the barrier needs every rank at every step) and no more than
    cfg.steps."""
    m = cfg.model
    n = len(layout.samples)
    steps = n // (m.batch * cfg.ranks)
    for r in range(cfg.ranks):
        if m.loader == "pytorch":
            per = -(-n // cfg.ranks)
            have = max(0, min(per, n - r * per))
        elif layout.files >= cfg.ranks:
            have = len(range(r, layout.files, cfg.ranks)) * m.samples_per_file
        else:
            have = len(range(r, n, cfg.ranks))
        steps = min(steps, have // m.batch)
    if cfg.steps is not None:
        steps = min(steps, cfg.steps)
    if steps < 2:
        raise InvalidArgument(f"an epoch has {steps} steps a rank; AU drops an epoch's first "
                              "step, so it needs at least 2 (raise --scale or --steps)")
    return steps


def epoch_plan(layout: Layout, cfg: TrainConfig, rank: int, epoch: int) -> EpochPlan:
    """Rank `rank`'s batches (sample indices) in epoch `epoch` (1-based): consecutive groups of
    `batch` of what its loader yields (DLIO's drop_last), steps_per_epoch of them."""
    m = cfg.model
    steps = steps_per_epoch(layout, cfg)
    reads: Tuple[Tuple[int, int], ...] = ()
    if m.loader == "pytorch":
        order = dlio_rank_samples(cfg.seed, len(layout.samples), cfg.ranks, rank, epoch,
                                  m.sample_shuffle)
    else:
        got, order = _tf_records(layout, cfg, rank)
        reads = tuple(got)
    batches = tuple(tuple(order[i * m.batch:(i + 1) * m.batch]) for i in range(steps))
    if reads:  # what the pipeline reads before it has yielded the last batch's records
        needed = {s for b in batches for s in b}
        last = max(i for i, (_, s) in enumerate(reads) if s in needed)
        reads = reads[:last + 1]
    return EpochPlan(batches, reads)


def rank_steps(layout: Layout, cfg: TrainConfig, rank: int, epoch: int) -> List[List[Sample]]:
    """Rank `rank`'s batches of epoch `epoch` (1-based) as samples."""
    return [[layout.samples[i] for i in b] for b in epoch_plan(layout, cfg, rank, epoch).batches]


def rank_reads(layout: Layout, cfg: TrainConfig, rank: int, epoch: int) -> List[Sample]:
    """The samples rank `rank` reads in epoch `epoch`: its batches' (PyTorch), or every record
    its TFRecord pipeline reads up to the last one a batch takes."""
    plan = epoch_plan(layout, cfg, rank, epoch)
    if plan.reads:
        return [layout.samples[s] for _, s in plan.reads]
    return [layout.samples[i] for b in plan.batches for i in b]


def _barrier(barrier, cfg: TrainConfig, rank: int, what: str) -> None:
    try:
        barrier.wait(cfg.deadline_s)
    except BrokenBarrierError:
        raise Aborted(f"rank {rank} left the barrier {what}: another rank failed or the "
                      f"deadline of {cfg.deadline_s:g} s passed") from None


def _rank(rank: int, ranks: int, a: Tuple[TrainConfig, Layout], barrier) -> Dict[str, Any]:
    cfg, layout = a
    m = cfg.model
    acc = rank_accelerator(cfg.gpus, rank, ranks)
    compute_s = m.compute_s + (cfg.compute_skew[rank] if rank < len(cfg.compute_skew) else 0.0)
    if m.loader == "pytorch":
        plans = [epoch_plan(layout, cfg, rank, e) for e in range(1, cfg.epochs + 1)]
    else:  # the same every epoch
        plans = [epoch_plan(layout, cfg, rank, 1)] * cfg.epochs
    with closing(cfg.target.path(), f"closing rank {rank}'s clients") as path:
        slot = -(-max(s.length for s in layout.samples) // _ALIGN) * _ALIGN
        pool = Pool(acc, path, slot, pool_slots(cfg, layout), m.batch)
        limit = int(path.clients[0].info().get("limits", {}).get("max_op_bytes", 0) or 0)
        piece = min(_PIECE, limit) if limit > 0 else _PIECE
        warm(path, layout, pool.bufs, piece)
        kind = TorchLoader if m.loader == "pytorch" else TFRecordLoader
        _barrier(barrier, cfg, rank, "before the run")
        origin = time.monotonic()
        epochs: List[Dict[str, Any]] = []
        moved = retries = verified = 0
        for e, plan in enumerate(plans, 1):
            _barrier(barrier, cfg, rank, f"before epoch {e}")
            start = time.monotonic()
            loader = kind(cfg, layout, path, acc, pool, piece, plan)
            log: List[List[float]] = []
            with closing(loader, f"ending epoch {e}'s loader") as ld:
                for k in range(len(plan.batches)):
                    t0 = time.monotonic()
                    ld.take(k)
                    loaded = time.monotonic()
                    spent = acc.compute(compute_s)
                    done = time.monotonic()
                    ld.give(k)
                    # DLIO's comm.barrier() after every step: no rank starts step k + 1
                    # before every rank has finished step k.
                    _barrier(barrier, cfg, rank, f"after epoch {e}'s step {k}")
                    log.append([t0 - origin, loaded - t0, spent, done - origin])
            end = time.monotonic()
            au, rate = dlio_epoch_metrics(start - origin, end - origin, log, m.batch)
            epochs.append({"epoch": e, "start_s": start - origin, "end_s": end - origin,
                           "au": au, "samples_per_s": rate, "steps": log})
            moved += loader.bytes
            retries += loader.retries
            verified += loader.verified
    run_s = epochs[-1]["end_s"] - epochs[0]["start_s"]
    waits = [s[1] for ep in epochs for s in ep["steps"][1:]]
    out = {
        "rank": rank, "device": acc.name, "steps": sum(len(ep["steps"]) for ep in epochs),
        "steps_per_epoch": len(plans[0].batches), "compute_s_per_step": compute_s,
        "au": statistics.fmean(ep["au"] for ep in epochs),
        "au_per_epoch": [ep["au"] for ep in epochs],
        "samples_per_s": statistics.fmean(ep["samples_per_s"] for ep in epochs),
        "samples_per_s_per_epoch": [ep["samples_per_s"] for ep in epochs],
        "bytes_read": moved, "read_gb_per_s": moved / run_s / 1e9 if run_s > 0 else 0.0,
        "run_s": run_s, "wait_percentiles_ms": percentiles([w * 1e3 for w in waits]),
        "compute_s": sum(s[2] for ep in epochs for s in ep["steps"][1:]),
        "samples_verified": verified, "retries": retries,
        "step_begin_s": [s[0] for ep in epochs for s in ep["steps"]],
        "step_wait_s": [s[1] for ep in epochs for s in ep["steps"]],
        "log": {"origin_monotonic_s": origin, "fields": list(LOG_FIELDS), "epochs": epochs},
    }
    if cfg.log_samples:
        out["samples_per_epoch"] = [[i for b in p.batches for i in b] for p in plans]
    return out


def deviations(cfg: TrainConfig, layout: Layout) -> List[str]:
    """Each way the run departs from MLPerf Storage's closed rules, a short sentence each."""
    out: List[str] = []
    m, published = cfg.model, TRAIN[cfg.model.name]
    if layout.files < layout.closed_files:
        why = f" (--scale {cfg.scale:g})" if cfg.scale != 1 else ""
        out.append(f"the dataset is {layout.files} files, fewer than the {layout.closed_files} "
                   f"of the closed datasize rule{why}")
    if cfg.steps is not None and cfg.steps < steps_per_epoch(layout, replace(cfg, steps=None)):
        out.append(f"--steps {cfg.steps} ends each epoch before the whole dataset is read")
    if cfg.epochs != CLOSED_EPOCHS:
        out.append(f"{cfg.epochs} epochs, not the closed {CLOSED_EPOCHS}")
    for f in fields(TrainModel):
        mine, theirs = getattr(m, f.name), getattr(published, f.name)
        if f.name not in _CLOSED_OPEN_FIELDS and mine != theirs:
            out.append(f"{f.name} {mine}, not the config's {theirs}")
    if any(cfg.compute_skew):
        out.append(f"ranks compute longer by {list(cfg.compute_skew)} s a step (unequal "
                   "accelerators)")
    if any(layout.repeats):
        r = max(layout.repeats)
        out.append(f"data repeat every {r} B ({r / (1 << 20):g} MiB): the store holds {r} B of "
                   "each dataset volume's bytes")
    return out


def _over_runs(each: List[Dict[str, Any]], key: str) -> Tuple[float, float]:
    """`key`'s mean over the runs and its stdev: over the runs (sample) when there are several,
    else the one run's own (over its epochs)."""
    mean = statistics.fmean(s[key] for s in each)
    if len(each) == 1:
        return mean, each[0][f"{key}_stdev"]
    return mean, statistics.stdev(s[key] for s in each)


def _compute_kind(cfg: TrainConfig) -> str:
    """What a step's compute was: a GPU kernel, or a host sleep (no GPUs, or ranks sharing one:
    device.rank_accelerator says why)."""
    if not cfg.gpus:
        return "sleep"
    if ranks_per_gpu(cfg.ranks, len(cfg.gpus)) > 1:
        return "sleep (ranks share a GPU)"
    return "gpu-kernel"


def run(cfg: TrainConfig) -> Dict[str, Any]:
    """Lays out the dataset, runs the ranks cfg.runs times, takes the volumes away (unless
    cfg.keep); the result as docs/workloads.md describes it."""
    cfg.target.check()
    if not 0 < cfg.ranks <= 1024:
        raise InvalidArgument(f"--ranks {cfg.ranks} is outside [1, 1024]")
    if not 0 < cfg.scale <= 1:
        raise InvalidArgument(f"--scale {cfg.scale:g} is outside (0, 1]")
    if not 0 < cfg.epochs <= 1000 or (cfg.steps is not None and not 1 < cfg.steps <= 1 << 30):
        raise InvalidArgument("--epochs must be in [1, 1000] and --steps in [2, 2^30]")
    if not 0 < cfg.runs <= 100:
        raise InvalidArgument(f"--runs {cfg.runs} is outside [1, 100]")
    if cfg.client_memory is not None and not 0 < cfg.client_memory <= 1 << 60:
        raise InvalidArgument(f"--client-host-memory {cfg.client_memory} B is outside "
                              "(0, 2^60]")
    if not 0 < cfg.client_hosts <= 1 << 16:
        raise InvalidArgument(f"client hosts {cfg.client_hosts} is outside [1, 65536]")
    if not 0 <= cfg.seed <= 0xFFFFFFFF - cfg.epochs:
        raise InvalidArgument(f"--seed {cfg.seed} is outside [0, 2^32 - 1 - epochs] (numpy's "
                              "seed range, the epoch added)")
    if len(cfg.compute_skew) > cfg.ranks or not all(0 <= s <= 3600 for s in cfg.compute_skew):
        raise InvalidArgument(f"compute skew {list(cfg.compute_skew)}: at most one value a "
                              "rank, each in [0, 3600] s")
    if cfg.repeat is not None and (isinstance(cfg.repeat, bool) or
                                   not isinstance(cfg.repeat, int) or cfg.repeat < 0):
        raise InvalidArgument(f"--repeat {cfg.repeat!r} is not a byte count (0: never repeat)")
    layout = lay_out(cfg)
    steps = steps_per_epoch(layout, cfg)
    runs = []
    t0 = time.perf_counter()
    if cfg.repeat:
        layout = repeated(layout, cfg.repeat)
    with Volumes(cfg.target, cfg.file, cfg.media, cfg.keep) as vols:
        layout = make_dataset(vols, cfg, layout)
        for _ in range(cfg.runs):
            per_rank = rank_runner.run(_rank, cfg.ranks, (cfg, layout), cfg.deadline_s)
            runs.append((per_rank, run_summary(cfg.model, per_rank)))
    wall = time.perf_counter() - t0
    m = cfg.model
    per_rank, _ = runs[-1]
    each = [s for _, s in runs]
    au = _over_runs(each, "au")[0]
    rate, mib = _over_runs(each, "samples_per_s"), _over_runs(each, "mib_per_s")
    devs = deviations(cfg, layout)
    result = {
        "workload": "train", "model": m.name,
        "parameters": {"sample_bytes": m.sample_bytes, "sample_stdev": m.sample_stdev,
                       "samples_per_file": m.samples_per_file, "batch": m.batch,
                       "compute_s": m.compute_s, "read_threads": m.read_threads,
                       "loader": m.loader, "prefetch_size": m.prefetch_size,
                       "prefetch_factor": prefetch_factor(m) if m.loader == "pytorch" else None,
                       "computation_threads": m.computation_threads,
                       "sample_shuffle": m.sample_shuffle, "shuffle_size": m.shuffle_size,
                       "au_threshold": m.au_threshold, "config_files": m.files},
        "closed": not devs, "deviations": devs,
        "scale": cfg.scale, "steps_limit": cfg.steps, "scaled": layout.files <
        layout.closed_files or cfg.steps is not None,
        "files": layout.files, "closed_files": layout.closed_files,
        "client_memory_bytes": host_memory() if cfg.client_memory is None else
        cfg.client_memory, "client_hosts": cfg.client_hosts,
        "samples": len(layout.samples),
        "dataset_bytes": sum(s.length for s in layout.samples),
        "repeat_bytes": max(layout.repeats) if any(layout.repeats) else None,
        "volumes": [n for n, _ in layout.volumes], "ranks": cfg.ranks,
        "compute": _compute_kind(cfg), "epochs": cfg.epochs,
        "steps_per_epoch": steps, "seed": cfg.seed,
        # The run's AU: the mean over ranks and epochs (over runs too), what passes or fails.
        "au": au, "au_mean": au, "au_min_rank": min(s["au_min_rank"] for s in each),
        "au_stdev": _over_runs(each, "au")[1],
        "au_per_epoch": each[-1]["au_per_epoch"],
        "passed": au >= m.au_threshold,
        "samples_per_s": rate[0], "samples_per_s_stdev": rate[1],
        "mib_per_s": mib[0], "mib_per_s_stdev": mib[1],
        "runs": [dict(s, run=i + 1, passed=s["au"] >= m.au_threshold)
                 for i, s in enumerate(each)],
        "read_gb_per_s": sum(r["bytes_read"] for r in per_rank) /
        max(r["run_s"] for r in per_rank) / 1e9,
        "needed_gb_per_s_per_rank": m.sample_bytes * m.batch / m.compute_s / 1e9
        if m.compute_s else None,
        "wall_s": wall, "per_rank": per_rank,
    }
    return result
