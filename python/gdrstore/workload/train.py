"""MLPerf Storage's training workloads (DLIO's emulation of a data loader feeding accelerators):
the dataset's files laid out in volumes, each rank reading its share of the shuffled samples,
`batch` at a time, into its accelerator's memory on `read_threads` loader threads that stay
ahead of the compute, then emulating a step's compute. Accelerator utilisation (AU) is as
MLPerf computes it: compute time over run time, the first step excluded."""

import math
import queue
import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple

from ..client import verify
from ..errors import Error, InvalidArgument
from . import ranks as rank_runner
from .cleanup import Cleanup, closing
from .device import Accelerator
from .models import TRAIN, TrainModel
from .stats import percentiles
from .target import Target, Volumes

_VERIFY_BYTES = 4096  # each sample's first bytes are checked against the volume's pattern
_ALIGN = 4096         # samples start on 4 KiB in a file, as files do on a file system
_PIECE = 64 << 20     # a sample is read in gets of at most this (and the daemon's largest op)
_PREFETCH = 2         # batches loaded ahead of the one in use (DLIO's default prefetch_size)


@dataclass(frozen=True)
class TrainConfig:
    model: TrainModel
    target: Target
    ranks: int = 1
    gpus: Tuple[str, ...] = ()     # rank r uses gpus[r % len]; () = host memory, sleep compute
    scale: float = 1.0             # of the published file count
    steps: Optional[int] = None    # per rank per epoch (None: the whole epoch)
    epochs: int = 1
    seed: int = 1
    prefix: str = "workload"
    file: bool = False             # file-backed volumes (a writable --volume-dir)
    media: Optional[str] = None    # media options of the dataset volumes
    retries: int = 2               # of a failed sample read
    deadline_s: float = 3600.0
    keep: bool = False             # leave the dataset's volumes on the daemons


def model_with(name: str, **overrides) -> TrainModel:
    """The published model `name` with the given fields replaced (None: kept)."""
    if name not in TRAIN:
        raise InvalidArgument(f"--model {name!r} is not one of {', '.join(TRAIN)}")
    fields = {k: v for k, v in overrides.items() if v is not None}
    m = replace(TRAIN[name], **fields)
    for f in ("sample_bytes", "samples_per_file", "files", "batch", "read_threads"):
        if not 0 < getattr(m, f) < (1 << 40):
            raise InvalidArgument(f"{f} {getattr(m, f)} is outside [1, 2^40)")
    if not 0 <= m.sample_stdev < (1 << 40):
        raise InvalidArgument(f"sample_stdev {m.sample_stdev} is outside [0, 2^40)")
    if not 0 <= m.compute_s <= 3600:
        raise InvalidArgument(f"compute time {m.compute_s} s is outside [0, 3600]")
    if not 0 < m.au_threshold <= 1:
        raise InvalidArgument(f"AU threshold {m.au_threshold} is outside (0, 1]")
    return m


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


def lay_out(cfg: TrainConfig) -> Layout:
    """The dataset: `files` x samples_per_file samples, sizes drawn around the model's mean
    (seeded), each file contiguous, files dealt to one volume per daemon in turn."""
    m = cfg.model
    per_step = cfg.ranks * m.batch
    files = max(1, math.ceil(m.files * cfg.scale))
    if cfg.steps is not None:  # enough samples for the steps asked
        files = max(files, math.ceil(per_step * cfg.steps / m.samples_per_file))
    if files * m.samples_per_file < per_step:
        raise InvalidArgument(f"--scale {cfg.scale:g} leaves {files * m.samples_per_file} samples, "
                              f"fewer than one step of {cfg.ranks} ranks x batch {m.batch}")
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
    return Layout(names, tuple(samples), files)


def rank_steps(layout: Layout, cfg: TrainConfig, rank: int, epoch: int) -> List[List[Sample]]:
    """Rank `rank`'s batches of one epoch: the samples shuffled (seed and epoch), dealt to the
    ranks in turn, cut into whole batches (the rest dropped, as DLIO's drop_last)."""
    order = list(layout.samples)
    random.Random(cfg.seed * 1_000_003 + epoch).shuffle(order)
    mine = order[rank::cfg.ranks]
    b = cfg.model.batch
    steps = [mine[i:i + b] for i in range(0, len(mine) - b + 1, b)]
    return steps[:cfg.steps] if cfg.steps is not None else steps


class _Loader:
    """read_threads threads loading batches in step order into free buffers ahead of the
    compute; `take(step)` waits for a batch, `give(buf)` hands its buffer back."""

    def __init__(self, cfg: TrainConfig, layout: Layout, path, acc: Accelerator,
                 steps: List[List[Sample]], bufs: List[Any], piece: int):
        self._cfg, self._layout, self._path, self._acc = cfg, layout, path, acc
        self._piece = piece
        self._steps = steps
        self._free: "queue.Queue[Any]" = queue.Queue()
        for b in bufs:
            self._free.put(b)
        self._lock = threading.Condition()
        self._next = 0
        self._ready: Dict[int, Tuple[Any, float]] = {}
        self._error: Optional[BaseException] = None
        self._raised = False  # whether take() raised _error
        self._stop = False
        self.bytes = 0
        self.retries = 0
        self.verified = 0
        self._threads = [threading.Thread(target=self._work, daemon=True)
                         for _ in range(cfg.model.read_threads)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        streams: Dict[int, Any] = {}
        c = Cleanup()
        try:
            while True:
                # A buffer first, then the next step: so the oldest step not yet loaded always
                # has a buffer (claiming steps first deadlocked with fewer buffers than threads).
                buf = self._free.get()
                if buf is None:
                    return
                with self._lock:
                    if self._stop or self._next >= len(self._steps):
                        self._free.put(buf)
                        return
                    step = self._next
                    self._next += 1
                t0 = time.perf_counter()
                moved = self._load(self._steps[step], buf, streams)
                with self._lock:
                    self.bytes += moved
                    self._ready[step] = (buf, time.perf_counter() - t0)
                    self._lock.notify_all()
        except BaseException as e:
            c.primary = e
        finally:
            for s in streams.values():
                c.run("closing a loader stream", s.close)
            if c.primary is not None:  # the thread's error, or else its streams' close's
                with self._lock:
                    self._error = self._error or c.primary
                    self._lock.notify_all()

    def _load(self, batch: List[Sample], buf, streams) -> int:
        pos, pending = 0, []
        for s in batch:
            client = self._path.client(s.volume)
            stream = streams.get(id(client))
            if stream is None:
                stream = streams[id(client)] = client.stream()
            name = self._layout.volumes[s.volume][0]
            for a in range(0, s.length, self._piece):
                n = min(self._piece, s.length - a)
                pending.append((s, a, n, pos + a,
                                stream.get(name, s.offset + a, buf, n, at=pos + a)))
            pos += s.length
        moved = 0
        firsts = []
        for s, a, n, at, fut in pending:
            moved += self._result(s, a, n, at, buf, fut)
            if a == 0:
                firsts.append((s, at, min(n, _VERIFY_BYTES)))
        heads = self._acc.heads(buf, [(at, v) for _, at, v in firsts])
        for (s, _, _), head in zip(firsts, heads):
            verify(bytearray(head), self._layout.volumes[s.volume][0], s.offset)
        self.verified += len(firsts)
        return moved

    def _result(self, s: Sample, a: int, n: int, at: int, buf, fut) -> int:
        """A piece's get, retried (unary) up to cfg.retries times when it failed."""
        tries = 0
        while True:
            try:
                return int(fut.result(self._cfg.target.timeout + 5))
            except Error:
                if tries >= self._cfg.retries:
                    raise
                tries += 1
                with self._lock:
                    self.retries += 1
                name = self._layout.volumes[s.volume][0]
                client = self._path.client(s.volume)
                try:
                    return int(client.get(name, s.offset + a, buf, n, at=at))
                except Error as e:
                    fut = _Failed(e)

    def take(self, step: int) -> Any:
        with self._lock:
            while step not in self._ready and self._error is None:
                self._lock.wait(1.0)
            if self._error is not None:
                self._raised = True
                raise self._error
            buf, _ = self._ready.pop(step)
            return buf

    def give(self, buf) -> None:
        self._free.put(buf)

    def stop(self) -> None:
        with self._lock:
            self._stop = True
        for _ in self._threads:
            self._free.put(None)
        for t in self._threads:
            t.join(self._cfg.target.timeout + 10)

    def close(self) -> None:
        """Stops the threads; raises a thread's error that no take() raised (a stream's close
        failing after the last batch was loaded), which would otherwise go unseen."""
        self.stop()
        with self._lock:
            if self._error is not None and not self._raised:
                self._raised = True
                raise self._error


class _Failed:
    def __init__(self, e: BaseException):
        self._e = e

    def result(self, _timeout=None):
        raise self._e


def _warm(path, layout: Layout, bufs: List[Any], piece: int) -> None:
    """One get into every piece of every buffer before the measured run: a buffer's first
    receive costs the host far more than later ones (seen on tcp), and a real loader's buffers
    are warm after its first batches."""
    name, size = layout.volumes[0]
    client = path.client(0)
    with closing(client.stream(), f"closing the warm-up stream of {name}") as s:
        for b in bufs:
            n = len(b) if not hasattr(b, "numel") else b.numel()
            for at in range(0, n, piece):
                k = min(piece, n - at, size)
                s.get(name, 0, b, k, at=at)
            s.wait_all()


def _rank(rank: int, ranks: int, a: Tuple[TrainConfig, Layout], barrier) -> Dict[str, Any]:
    cfg, layout = a
    acc = Accelerator(cfg.gpus[rank % len(cfg.gpus)] if cfg.gpus else None)
    with closing(cfg.target.path(), f"closing rank {rank}'s clients") as path:
        epochs = [rank_steps(layout, cfg, rank, e) for e in range(cfg.epochs)]
        steps = [b for ep in epochs for b in ep]
        if len(steps) < 2:
            raise InvalidArgument(f"rank {rank} has {len(steps)} steps; AU needs at least 2 "
                                  "(raise --scale or --steps)")
        biggest = max(sum(s.length for s in b) for b in steps)
        depth = min(cfg.model.read_threads, _PREFETCH) + 1
        bufs = [acc.buffer(path.clients[0], biggest) for _ in range(depth)]
        for b in bufs:
            for c in path.clients:
                c.register(b)
        limit = int(path.clients[0].info().get("limits", {}).get("max_op_bytes", 0) or 0)
        piece = min(_PIECE, limit) if limit > 0 else _PIECE
        _warm(path, layout, bufs, piece)
        loader = _Loader(cfg, layout, path, acc, steps, bufs, piece)
        barrier.wait(cfg.deadline_s)
        t_start = time.perf_counter()
        loader.start()
        waits, computes, begins = [], [], []
        with closing(loader, "stopping the loader"):
            for i in range(len(steps)):
                begins.append(time.perf_counter() - t_start)
                t0 = time.perf_counter()
                buf = loader.take(i)
                waits.append(time.perf_counter() - t0)
                computes.append(acc.compute(cfg.model.compute_s))
                loader.give(buf)
        t_end = time.perf_counter() - t_start
        measured = t_end - begins[1]
        au = sum(computes[1:]) / measured if measured > 0 else 0.0
        samples = (len(steps) - 1) * cfg.model.batch
        return {
            "rank": rank, "device": acc.name, "steps": len(steps), "au": au,
            "samples_per_s": samples / measured if measured > 0 else 0.0,
            "bytes_read": loader.bytes, "read_gb_per_s": loader.bytes / t_end / 1e9,
            "run_s": t_end, "measured_s": measured, "compute_s": sum(computes[1:]),
            "wait_s": sum(waits[1:]), "wait_percentiles_ms": percentiles(
                [w * 1e3 for w in waits[1:]]),
            "samples_verified": loader.verified, "retries": loader.retries,
            "step_begin_s": begins, "step_wait_s": waits,
        }


def predicted_au(model: TrainModel, bandwidth: float, ranks: int) -> float:
    """AU when the dataset's one shared read bandwidth (bytes/s) is split evenly over `ranks`
    accelerators and loading overlaps compute fully: compute / max(compute, batch bytes / share)."""
    need = model.sample_bytes * model.batch
    if model.compute_s == 0:
        return 0.0 if need > 0 else 1.0
    load = need / (bandwidth / ranks) if bandwidth > 0 else 0.0
    return model.compute_s / max(model.compute_s, load)


def run(cfg: TrainConfig) -> Dict[str, Any]:
    """Lays out the dataset, runs the ranks, takes the volumes away (unless cfg.keep); the
    result as docs/workloads.md describes it."""
    cfg.target.check()
    if not 0 < cfg.ranks <= 1024:
        raise InvalidArgument(f"--ranks {cfg.ranks} is outside [1, 1024]")
    if not 0 < cfg.scale <= 1:
        raise InvalidArgument(f"--scale {cfg.scale:g} is outside (0, 1]")
    if not 0 < cfg.epochs <= 1000 or (cfg.steps is not None and not 1 < cfg.steps <= 1 << 30):
        raise InvalidArgument("--epochs must be in [1, 1000] and --steps in [2, 2^30]")
    layout = lay_out(cfg)
    with Volumes(cfg.target, cfg.file, cfg.media, cfg.keep) as vols:
        for i, (name, size) in enumerate(layout.volumes):
            vols.make(i, name, size)
        t0 = time.perf_counter()
        per_rank = rank_runner.run(_rank, cfg.ranks, (cfg, layout), cfg.deadline_s)
        wall = time.perf_counter() - t0
    m = cfg.model
    au = min(r["au"] for r in per_rank)
    dataset = sum(s.length for s in layout.samples)
    return {
        "workload": "train", "model": m.name,
        "parameters": {"sample_bytes": m.sample_bytes, "sample_stdev": m.sample_stdev,
                       "samples_per_file": m.samples_per_file, "batch": m.batch,
                       "compute_s": m.compute_s, "read_threads": m.read_threads,
                       "au_threshold": m.au_threshold, "published_files": m.files},
        "scale": cfg.scale, "steps_limit": cfg.steps,
        "scaled": cfg.scale != 1 or cfg.steps is not None,
        "files": layout.files, "samples": len(layout.samples), "dataset_bytes": dataset,
        "volumes": [n for n, _ in layout.volumes], "ranks": cfg.ranks,
        "compute": "gpu-kernel" if cfg.gpus else "sleep", "epochs": cfg.epochs,
        "au": au, "au_mean": sum(r["au"] for r in per_rank) / len(per_rank),
        "passed": au >= m.au_threshold,
        "samples_per_s": sum(r["samples_per_s"] for r in per_rank),
        "read_gb_per_s": sum(r["bytes_read"] for r in per_rank) /
        max(r["run_s"] for r in per_rank) / 1e9,
        "needed_gb_per_s_per_rank": m.sample_bytes * m.batch / m.compute_s / 1e9
        if m.compute_s else None,
        "wall_s": wall, "per_rank": per_rank,
    }
