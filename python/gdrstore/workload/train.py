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
in the result."""

import math
import os
import queue
import random
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, fields, replace
from threading import BrokenBarrierError
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..client import verify
from ..errors import Aborted, Error, InvalidArgument
from . import ranks as rank_runner
from .cleanup import Cleanup, closing
from .device import Accelerator
from .models import TRAIN, TrainModel
from .repeat import make_dataset, repeated
from .stats import percentiles
from .target import Target, Volumes

_VERIFY_BYTES = 4096  # each sample's first bytes are checked against the volume's pattern
_ALIGN = 4096         # samples start on 4 KiB in a file, as files do on a file system
_PIECE = 64 << 20     # a sample is read in gets of at most this (and the daemon's largest op)

# MLPerf Storage's closed rules for training (mlpstorage's calculate_training_data_size, and
# the configs' train.epochs).
CLOSED_EPOCHS = 5
CLOSED_MEMORY_MULTIPLE = 5   # the dataset is at least this many times the clients' memory
CLOSED_MIN_STEPS = 500       # ... and at least this many steps an epoch
# Fields a closed run may change (mlpstorage: reader.read_threads; the dataset's file count
# is the datasize rule's, judged on its own).
_CLOSED_OPEN_FIELDS = ("read_threads", "files")
_LOG_FIELDS = ("begin_s", "wait_s", "compute_s", "end_s")


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


# DLIO's sample order: numpy's legacy global generator (np.random.seed, np.random.shuffle),
# written out here so that the package needs no numpy; the test checks it against numpy.
def _mt19937(seed: int) -> random.Random:
    """A generator whose getrandbits(32) gives what numpy's RandomState(seed) draws: the
    MT19937 state of init_genrand(seed), the one numpy's legacy seeding makes from an int."""
    mt = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
    g = random.Random()
    g.setstate((3, tuple(mt) + (624,), None))
    return g


def _legacy_shuffle(seed: int, values: List[int]) -> None:
    """numpy's RandomState(seed).shuffle of a 1-D array, in place: Fisher-Yates from the end,
    each index drawn by masked rejection (numpy's random_interval)."""
    g = _mt19937(seed)
    for i in range(len(values) - 1, 0, -1):
        mask = i
        for s in (1, 2, 4, 8, 16):
            mask |= mask >> s
        j = g.getrandbits(32) & mask
        while j > i:
            j = g.getrandbits(32) & mask
        values[i], values[j] = values[j], values[i]


def dlio_rank_samples(seed: int, samples: int, ranks: int, rank: int, epoch: int,
                      shuffle: bool = True) -> List[int]:
    """The global sample indices rank `rank` reads in epoch `epoch` (1-based, as DLIO counts)
    and their order, as DLIO's PyTorch path assigns them (dlio_benchmark/utils/config.py,
    ConfigArguments.get_global_map_index, and torch_data_loader.py's dlio_sampler): a
    contiguous block of ceil(samples / ranks), the last rank's cut at the end, so a rank reads
    the same samples every epoch; shuffled within the block by numpy's generator seeded with
    seed + epoch (seed_change_epoch) when sample_shuffle is on."""
    if not 0 < ranks <= samples or not 0 <= rank < ranks:
        raise InvalidArgument(f"rank {rank} of {ranks} over {samples} samples")
    if not 0 <= seed + epoch <= 0xFFFFFFFF:
        raise InvalidArgument(f"seed {seed} + epoch {epoch} is outside [0, 2^32 - 1] (numpy's "
                              "seed range)")
    per = -(-samples // ranks)
    block = list(range(rank * per, min((rank + 1) * per, samples)))
    if shuffle:
        _legacy_shuffle(seed + epoch, block)
    return block


def dlio_tfrecord_records(files: int, samples_per_file: int, ranks: int, rank: int,
                          read_threads: int, shuffle_size: int, seed: int,
                          file_shuffle: bool = False
                          ) -> Tuple[List[Tuple[int, int]], List[int]]:
    """Rank `rank`'s records through DLIO's TFRecord pipeline (dlio_benchmark/reader/
    tf_reader.py, TFReader.next): the file list, shuffled when file_shuffle is on as
    ConfigArguments.reconfigure shuffles it for the first epoch (numpy's generator seeded with
    seed + 1) before the pipeline is built; the rank's files are every ranks-th one of it from
    `rank` (all of them when there are fewer files than ranks); read_threads files are read at
    once, each
    sequentially, their records interleaved in turn (TFRecordDataset num_parallel_reads, a
    finished file's reader taking the next file); a seeded buffer of shuffle_size records
    (0: none) picks each next record at random; with fewer files than ranks, every ranks-th
    record is kept. Returns (the records read, as (reader, sample index) in read order, and
    the sample indices the pipeline yields, in order). The same every epoch: DLIO's pipeline
    restarts from its seed."""
    if not 0 <= seed + 1 <= 0xFFFFFFFF:
        raise InvalidArgument(f"seed {seed} + 1 is outside [0, 2^32 - 1] (numpy's seed range)")
    file_list = list(range(files))
    if file_shuffle:
        _legacy_shuffle(seed + 1, file_list)
    mine = file_list[rank::ranks] if files >= ranks else file_list
    pending = iter(mine)
    open_files: List[List[Any]] = []  # [reader, the file's records left]
    for w in range(min(read_threads, len(mine))):
        f = next(pending)
        open_files.append([w, iter(range(f * samples_per_file, (f + 1) * samples_per_file))])
    reads: List[Tuple[int, int]] = []
    i = 0
    while open_files:
        w, records = open_files[i]
        s = next(records, None)
        if s is None:
            f = next(pending, None)
            if f is None:
                del open_files[i]
                i = i % len(open_files) if open_files else 0
            else:
                open_files[i][1] = iter(range(f * samples_per_file, (f + 1) * samples_per_file))
            continue
        reads.append((w, s))
        i = (i + 1) % len(open_files)
    order = [s for _, s in reads]
    if shuffle_size > 1:
        rng = random.Random(seed)
        buf: List[int] = []
        order = []
        for _, s in reads:
            if len(buf) < shuffle_size:
                buf.append(s)
                continue
            j = rng.randrange(shuffle_size)  # a full buffer yields one and takes the next
            order.append(buf[j])
            buf[j] = s
        while buf:
            j = rng.randrange(len(buf))
            order.append(buf[j])
            buf[j] = buf[-1]
            buf.pop()
    if files < ranks:
        order = order[rank::ranks]
    return reads, order


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


class _Pool:
    """The rank's accelerator memory for samples: `count` slots of `slot` bytes, in buffers
    of `per` slots, each registered with every client of the rank. Slots are handed out and
    back under the loader's lock."""

    def __init__(self, acc: Accelerator, path, slot: int, count: int, per: int):
        self.slot, self.per = slot, per
        nbuf = -(-count // per)
        self.bufs = [acc.buffer(path.clients[0], slot * per) for _ in range(nbuf)]
        for b in self.bufs:
            for c in path.clients:
                c.register(b)
        self.free = deque(range(count))

    def where(self, i: int) -> Tuple[Any, int]:
        return self.bufs[i // self.per], i % self.per * self.slot


class _Loader:
    """One epoch of a rank's loader: threads reading samples into pool slots, batches handed
    to the step loop in order. `take(k)` waits for batch k; `give(k)` hands its slots back;
    `close()` ends the threads and raises a thread's error no take() raised."""

    def __init__(self, cfg: TrainConfig, layout: Layout, path, acc: Accelerator, pool: _Pool,
                 piece: int, plan: EpochPlan):
        self._cfg, self._layout, self._path, self._acc = cfg, layout, path, acc
        self._pool, self._piece, self._plan = pool, piece, plan
        self._cv = threading.Condition()
        self._ready: Dict[int, List[int]] = {}   # batch -> its samples' slots
        self._taken = 0
        self._error: Optional[BaseException] = None
        self._raised = False
        self._stop = False
        self._threads: List[threading.Thread] = []
        self.bytes = 0
        self.retries = 0
        self.verified = 0

    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=self._guard, args=(target, *args), daemon=True)
        self._threads.append(t)
        t.start()

    def _guard(self, target, *args) -> None:
        """Runs a thread's work with its own streams; its error ends the epoch."""
        streams: Dict[int, Any] = {}
        c = Cleanup()
        try:
            target(streams, *args)
        except BaseException as e:
            c.primary = e
        finally:
            for s in streams.values():
                c.run("closing a loader stream", s.close)
            if c.primary is not None:
                with self._cv:
                    self._error = self._error or c.primary
                    self._cv.notify_all()

    def _wait(self, ready) -> bool:
        """Waits under the lock until ready() or the epoch stops; False when it stopped."""
        while not ready():
            if self._stop or self._error is not None:
                return False
            self._cv.wait(1.0)
        return not self._stop and self._error is None

    def _slot(self) -> Optional[int]:
        with self._cv:
            if not self._wait(lambda: bool(self._pool.free)):
                return None
            return self._pool.free.popleft()

    def _read(self, sample: int, slot: int, streams) -> None:
        """Reads a whole sample into `slot`: its pieces in flight together, then waited for."""
        s = self._layout.samples[sample]
        client = self._path.client(s.volume)
        stream = streams.get(id(client))
        if stream is None:
            stream = streams[id(client)] = client.stream()
        name = self._layout.volumes[s.volume][0]
        buf, at = self._pool.where(slot)
        pending = []
        for a in range(0, s.length, self._piece):
            n = min(self._piece, s.length - a)
            pending.append((a, n, stream.get(name, s.offset + a, buf, n, at=at + a)))
        moved = sum(self._result(s, a, n, buf, at + a, fut) for a, n, fut in pending)
        with self._cv:
            self.bytes += moved

    def _result(self, s: Sample, a: int, n: int, buf, at: int, fut) -> int:
        """A piece's get, retried (unary) up to cfg.retries times when it failed."""
        tries = 0
        while True:
            try:
                return int(fut.result(self._cfg.target.timeout + 5))
            except Error:
                if tries >= self._cfg.retries:
                    raise
                tries += 1
                with self._cv:
                    self.retries += 1
                name = self._layout.volumes[s.volume][0]
                try:
                    return int(self._path.client(s.volume).get(name, s.offset + a, buf, n,
                                                               at=at))
                except Error as e:
                    fut = _Failed(e)

    def _verify(self, samples: Sequence[int], slots: Sequence[int]) -> None:
        """Each sample's first bytes against its volume's pattern, a buffer's spans at once."""
        by_buf: Dict[int, List[Tuple[int, int, Sample]]] = {}
        for i, slot in zip(samples, slots):
            s = self._layout.samples[i]
            by_buf.setdefault(slot // self._pool.per, []).append(
                (self._pool.where(slot)[1], min(s.length, _VERIFY_BYTES), s))
        for b, spans in by_buf.items():
            heads = self._acc.heads(self._pool.bufs[b], [(at, n) for at, n, _ in spans])
            for (_, _, s), head in zip(spans, heads):
                verify(bytearray(head), self._layout.volumes[s.volume][0], s.offset,
                       repeat=self._layout.repeat_of(s.volume))
        with self._cv:
            self.verified += len(samples)

    def take(self, k: int) -> None:
        with self._cv:
            self._wait(lambda: k in self._ready)
            if self._error is not None:
                self._raised = True
                raise self._error
            self._taken = k + 1
            self._on_take(k)
            self._cv.notify_all()

    def _on_take(self, k: int) -> None:
        pass

    def give(self, k: int) -> None:
        with self._cv:
            self._pool.free.extend(self._ready.pop(k))
            self._cv.notify_all()

    def close(self) -> None:
        if self._error is None and self._taken == len(self._plan.batches):  # a whole epoch
            self._drain()
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._end()
        for t in self._threads:
            t.join(self._cfg.target.timeout + 10)
        with self._cv:
            for slots in self._ready.values():  # batches read but never taken (an error)
                self._pool.free.extend(slots)
            self._ready.clear()
            if self._error is not None and not self._raised:
                self._raised = True
                raise self._error

    def _drain(self) -> None:
        pass

    def _end(self) -> None:
        pass


class _TorchLoader(_Loader):
    """PyTorch's DataLoader as DLIO sets it up: read_threads workers; batch k goes to worker
    k mod read_threads; read_threads x prefetch_factor batches are in flight, the next one
    asked for when the step loop receives one; a worker reads its batch's samples one after
    another, so a rank has read_threads samples in flight."""

    def __init__(self, *args):
        super().__init__(*args)
        m = self._cfg.model
        self.in_flight = m.read_threads * prefetch_factor(m)
        self._tasks: List[deque] = [deque() for _ in range(m.read_threads)]
        self._next = 0
        with self._cv:
            for _ in range(self.in_flight):
                self._ask()
        for w in range(m.read_threads):
            self._spawn(self._work, w)

    def _ask(self) -> None:
        if self._next < len(self._plan.batches):
            self._tasks[self._next % len(self._tasks)].append(self._next)
            self._next += 1

    def _on_take(self, k: int) -> None:
        self._ask()

    def _work(self, streams, w: int) -> None:
        tasks = self._tasks[w]
        while True:
            with self._cv:
                if not self._wait(lambda: bool(tasks) or self._next >= len(self._plan.batches)):
                    return
                if not tasks:
                    return
                k = tasks.popleft()
            batch = self._plan.batches[k]
            slots = []
            for i in batch:
                slot = self._slot()
                if slot is None:  # the epoch stopped
                    with self._cv:
                        self._pool.free.extend(slots)
                    return
                slots.append(slot)
                self._read(i, slot, streams)
            self._verify(batch, slots)
            with self._cv:
                self._ready[k] = slots
                self._cv.notify_all()


class _TFRecordLoader(_Loader):
    """DLIO's TFRecord pipeline: one reader per parallel read, each reading its files'
    records in order; a record is read once the pipeline's buffers (the shuffle buffer,
    prefetch_size batches, the batch being built and the one in use) have room for it; a
    batch whose records are all read is parsed (its samples checked) by one of
    computation_threads threads and handed on."""

    def __init__(self, *args):
        super().__init__(*args)
        m = self._cfg.model
        self._slot_of: Dict[int, Tuple[int, int]] = {}  # sample -> (batch, place in batch)
        for k, b in enumerate(self._plan.batches):
            for j, s in enumerate(b):
                self._slot_of[s] = (k, j)
        self._slots: List[List[int]] = [[-1] * len(b) for b in self._plan.batches]
        self._missing = [len(b) for b in self._plan.batches]
        self._parse: "queue.Queue[Optional[int]]" = queue.Queue()
        self._inputs_per_batch = m.batch * (self._cfg.ranks if self._layout.files <
                                            self._cfg.ranks else 1)
        self._ahead = tf_window(m, self._inputs_per_batch)
        readers: Dict[int, List[Tuple[int, int]]] = {}
        for pos, (w, s) in enumerate(self._plan.reads):
            readers.setdefault(w, []).append((pos, s))
        for w in sorted(readers):
            self._spawn(self._reader, readers[w])
        self._readers = list(self._threads)
        for _ in range(m.computation_threads):
            self._spawn(self._parser)

    def _reader(self, streams, records: List[Tuple[int, int]]) -> None:
        for pos, s in records:
            with self._cv:
                # The pipeline's buffers bound how far reading runs ahead of the steps.
                if not self._wait(lambda: pos < self._ahead + self._inputs_per_batch *
                                  self._taken):
                    return
            slot = self._slot()
            if slot is None:
                return
            self._read(s, slot, streams)
            with self._cv:
                where = self._slot_of.get(s)
                if where is None:  # a record no batch of this rank takes
                    self._pool.free.append(slot)
                    self._cv.notify_all()
                    continue
                k, j = where
                self._slots[k][j] = slot
                self._missing[k] -= 1
                if self._missing[k] == 0:
                    self._parse.put(k)

    def _parser(self, streams) -> None:
        while True:
            k = self._parse.get()
            if k is None:
                return
            self._verify(self._plan.batches[k], self._slots[k])
            with self._cv:
                self._ready[k] = self._slots[k]
                self._cv.notify_all()

    def _drain(self) -> None:
        """Lets the readers finish the epoch's reads (records read ahead that no batch took),
        so that what a rank reads is what epoch_plan says, whatever the timing."""
        for t in self._readers:
            t.join(self._cfg.target.timeout + 10)

    def _end(self) -> None:
        for _ in range(self._cfg.model.computation_threads):
            self._parse.put(None)


def prefetch_factor(m: TrainModel) -> int:
    """The prefetch_factor DLIO gives PyTorch's DataLoader: ceil(prefetch_size /
    read_threads), or 2 when that is 0 (torch_data_loader.py, TorchDataLoader.read)."""
    return max(1, math.ceil(m.prefetch_size / m.read_threads)) if m.prefetch_size > 0 else 2


def tf_window(m: TrainModel, inputs_per_batch: int) -> int:
    """How many records the TFRecord pipeline reads ahead of the batches the steps took: the
    shuffle buffer, prefetch_size batches, the batch being built and the one in use, and one
    record in each reader."""
    shuffle = m.shuffle_size if m.sample_shuffle else 0
    return shuffle + inputs_per_batch * (m.prefetch_size + 2) + m.read_threads


def _pool_slots(cfg: TrainConfig, layout: Layout) -> int:
    m = cfg.model
    if m.loader == "pytorch":
        return (m.read_threads * prefetch_factor(m) + 1) * m.batch
    # The batches not yet given back, and records of later batches read early: at most
    # twice the shuffle buffer and one record a reader (the window's bound).
    shuffle = m.shuffle_size if m.sample_shuffle else 0
    return 2 * shuffle + m.batch * (m.prefetch_size + 4) + m.read_threads


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


def dlio_epoch_metrics(start_s: float, end_s: float, steps: Sequence[Sequence[float]],
                       batch: int) -> Tuple[float, float]:
    """(AU, samples/s) of one rank's epoch as DLIO's StatsCounter computes them
    (dlio_benchmark/utils/statscounter.py, compute_metrics_train, metric_exclude_start_steps
    1): the compute of every step but the first over the epoch's time less the first step's
    (its load and compute: DLIO's proc, from the step's start to its compute's end), and
    (steps - 2) batches over that time. `steps` holds _LOG_FIELDS of each step."""
    compute = sum(s[2] for s in steps[1:])
    measured = end_s - start_s - (steps[0][3] - steps[0][0])
    if measured <= 0:
        return 0.0, 0.0
    return (compute / measured if compute > 0 else 0.0,
            (len(steps) - 2) * batch / measured)


def _barrier(barrier, cfg: TrainConfig, rank: int, what: str) -> None:
    try:
        barrier.wait(cfg.deadline_s)
    except BrokenBarrierError:
        raise Aborted(f"rank {rank} left the barrier {what}: another rank failed or the "
                      f"deadline of {cfg.deadline_s:g} s passed") from None


def _rank(rank: int, ranks: int, a: Tuple[TrainConfig, Layout], barrier) -> Dict[str, Any]:
    cfg, layout = a
    m = cfg.model
    acc = Accelerator(cfg.gpus[rank % len(cfg.gpus)] if cfg.gpus else None)
    compute_s = m.compute_s + (cfg.compute_skew[rank] if rank < len(cfg.compute_skew) else 0.0)
    if m.loader == "pytorch":
        plans = [epoch_plan(layout, cfg, rank, e) for e in range(1, cfg.epochs + 1)]
    else:  # the same every epoch
        plans = [epoch_plan(layout, cfg, rank, 1)] * cfg.epochs
    with closing(cfg.target.path(), f"closing rank {rank}'s clients") as path:
        slot = -(-max(s.length for s in layout.samples) // _ALIGN) * _ALIGN
        pool = _Pool(acc, path, slot, _pool_slots(cfg, layout), m.batch)
        limit = int(path.clients[0].info().get("limits", {}).get("max_op_bytes", 0) or 0)
        piece = min(_PIECE, limit) if limit > 0 else _PIECE
        _warm(path, layout, pool.bufs, piece)
        kind = _TorchLoader if m.loader == "pytorch" else _TFRecordLoader
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
        "log": {"origin_monotonic_s": origin, "fields": list(_LOG_FIELDS), "epochs": epochs},
    }
    if cfg.log_samples:
        out["samples_per_epoch"] = [[i for b in p.batches for i in b] for p in plans]
    return out


def predicted_au(model: TrainModel, bandwidth: float, ranks: int) -> float:
    """AU when the dataset's one shared read bandwidth (bytes/s) is split evenly over `ranks`
    accelerators and loading overlaps compute fully: compute / max(compute, batch bytes / share)."""
    need = model.sample_bytes * model.batch
    if model.compute_s == 0:
        return 0.0 if need > 0 else 1.0
    load = need / (bandwidth / ranks) if bandwidth > 0 else 0.0
    return model.compute_s / max(model.compute_s, load)


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


def _summary(m: TrainModel, per_rank: List[Dict[str, Any]]) -> Dict[str, Any]:
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
            runs.append((per_rank, _summary(cfg.model, per_rank)))
    wall = time.perf_counter() - t0
    m = cfg.model
    per_rank, _ = runs[-1]
    each = [s for _, s in runs]
    au = statistics.fmean(s["au"] for s in each)
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
        "compute": "gpu-kernel" if cfg.gpus else "sleep", "epochs": cfg.epochs,
        "steps_per_epoch": steps, "seed": cfg.seed,
        # The run's AU: the mean over ranks and epochs (over runs too), what passes or fails.
        "au": au, "au_mean": au, "au_min_rank": min(s["au_min_rank"] for s in each),
        "au_stdev": each[0]["au_stdev"] if len(each) == 1 else statistics.stdev(
            s["au"] for s in each),
        "au_per_epoch": each[-1]["au_per_epoch"],
        "passed": au >= m.au_threshold,
        "samples_per_s": statistics.fmean(s["samples_per_s"] for s in each),
        "samples_per_s_stdev": each[0]["samples_per_s_stdev"] if len(each) == 1 else
        statistics.stdev(s["samples_per_s"] for s in each),
        "mib_per_s": statistics.fmean(s["mib_per_s"] for s in each),
        "mib_per_s_stdev": each[0]["mib_per_s_stdev"] if len(each) == 1 else
        statistics.stdev(s["mib_per_s"] for s in each),
        "runs": [dict(s, run=i + 1, passed=s["au"] >= m.au_threshold)
                 for i, s in enumerate(each)],
        "read_gb_per_s": sum(r["bytes_read"] for r in per_rank) /
        max(r["run_s"] for r in per_rank) / 1e9,
        "needed_gb_per_s_per_rank": m.sample_bytes * m.batch / m.compute_s / 1e9
        if m.compute_s else None,
        "wall_s": wall, "per_rank": per_rank,
    }
    return result
