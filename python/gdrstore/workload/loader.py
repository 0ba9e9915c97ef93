"""A training rank's data loader, one epoch at a time, as DLIO sets it up: PyTorch's DataLoader
(read_threads workers, prefetch_factor batches each, a worker reading its batch's samples one
after another) or DLIO's TFRecord pipeline (a reader per parallel read, its files' records in
order, bounded by the pipeline's buffers, batches parsed by computation_threads threads). Both
read whole samples into the rank's accelerator memory (a Pool of slots) and check each one's
first bytes. Plans, layouts and configurations are train.py's (EpochPlan, Layout, TrainConfig)."""

from __future__ import annotations

import math
import queue
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ..client import verify
from ..errors import Error
from .cleanup import Cleanup, closing
from .device import Accelerator
from .models import TrainModel

if TYPE_CHECKING:  # train imports this module; these are its types, for annotations only
    from .train import EpochPlan, Layout, Sample, TrainConfig

_VERIFY_BYTES = 4096  # each sample's first bytes are checked against the volume's pattern


class Pool:
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


class Loader:
    """One epoch of a rank's loader: threads reading samples into pool slots, batches handed
    to the step loop in order. `take(k)` waits for batch k; `give(k)` hands its slots back;
    `close()` ends the threads and raises a thread's error no take() raised."""

    def __init__(self, cfg: TrainConfig, layout: Layout, path, acc: Accelerator, pool: Pool,
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


class TorchLoader(Loader):
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


class TFRecordLoader(Loader):
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


def pool_slots(cfg: TrainConfig, layout: Layout) -> int:
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


def warm(path, layout: Layout, bufs: List[Any], piece: int) -> None:
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
