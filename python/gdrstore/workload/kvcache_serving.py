"""One client of MLPerf Storage v3's KV-cache benchmark serving its users for one trial
(kvcache_mlperf has the options and the scoring). Users think, then ask; a worker serves each
request: the conversation's earlier turns read back, the request's entry written to the fastest
tier with room (prefill), then read once and once more for every 32 tokens generated (decode).
The tiers are the CPU's memory (a registered host buffer; its least recently used entries move
down to storage when it passes 80 %) and storage (the client's volume; its least recently used
entries deleted when full). An entry moves in chunks, each stamped with the entry and its index
and checked when read back; an entry in use is pinned, never moved or deleted under a read."""

import collections
import math
import queue
import random
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..errors import DataLoss, DeadlineExceeded, ResourceExhausted
from .cleanup import closing
from .stats import percentile

# The benchmark's user templates: context tokens, tokens generated, think time in seconds.
USER_TYPES = {
    "chatbot": ((512, 4096), (50, 200), (0.1, 0.5)),
    "coding": ((4096, 25000), (100, 500), (0.2, 1.0)),
    "document": ((4096, 16384), (200, 800), (0.3, 1.5)),
}
# QoS levels with their queue priority and the cumulative chance a user has the level.
_QOS = (("interactive", 3, 0.15), ("responsive", 2, 0.50), ("batch", 1, 1.0))
_CONTINUE = 0.8           # a user's next request continues its conversation with this chance
MAX_TURNS = 10            # turns a conversation may have (this project's choice)
DECODE_BATCH = 32         # tokens generated for each decode read of the entry
_PREFILL_ONLY = 10_000    # a context this long is prefill only: no decode reads
_TARGET_USAGE = 0.8       # a tier above storage fills to this share before entries move down
_LARGEST = 0.95           # an entry over this share of a tier above storage skips it
MAX_WORKERS = 500         # request workers a client runs at most
_STAMP = struct.Struct("<8sQQ")  # magic, entry id, chunk index: the head of every chunk
_MAGIC = b"GDRKVML1"


@dataclass
class User:
    id: int
    kind: str
    context: int
    generate: int
    think_s: float
    qos: str
    priority: int


def users(seed: int, n: int) -> List[User]:
    """A client's `n` users, as the benchmark draws them: a template, lengths within its
    ranges, a think time, a QoS level."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.choice(list(USER_TYPES))
        (c0, c1), (g0, g1), (t0, t1) = USER_TYPES[kind]
        ctx, gen, think = rng.randint(c0, c1), rng.randint(g0, g1), rng.uniform(t0, t1)
        u = rng.random()
        qos, prio = next((q, p) for q, p, cum in _QOS if u < cum)
        out.append(User(i, kind, ctx, gen, think, qos, prio))
    return out


@dataclass
class _Entry:
    id: int
    size: int
    tier: str                   # "cpu" or "storage"
    slots: List[int]
    pins: int = 0               # reads or writes in flight: never evicted while pinned
    # Its bytes are in place. An entry is listed as soon as its slots are taken, and another
    # worker may serve the conversation's next turn while this one still writes it: a read
    # waits for this, or it would read the slots' previous occupant.
    written: bool = False


@dataclass
class Request:
    user: int
    conversation: int
    turn: int
    context: int                # tokens (scaled)
    generate: int
    prefill_only: bool          # decided on the context before scaling, as at full scale
    submitted: float = 0.0


def requests(seed: int, u: User, scale: float) -> Iterator[Tuple[float, Request]]:
    """User `u`'s requests in the order a run asks them, each after the seconds the user thinks
    first: a function of the seed and the user alone, so a run's requests can be predicted. A
    request continues the conversation with chance 0.8 (and up to MAX_TURNS turns), and asks
    for a quarter to all of the user's context and generated lengths."""
    rng = random.Random(seed * 1_000_003 + u.id + 1)
    conversation, seq, turn = None, 0, 0
    while True:
        think_s = u.think_s * rng.uniform(0.8, 1.2)
        if conversation is not None and (rng.random() >= _CONTINUE or turn >= MAX_TURNS):
            conversation = None
        if conversation is None:
            conversation, seq, turn = (u.id << 32) | seq, seq + 1, 0
        turn += 1
        ctx = rng.randint(max(1, u.context // 4), u.context)
        gen = rng.randint(max(1, u.generate // 4), u.generate)
        yield think_s, Request(u.id, conversation, turn, max(1, int(ctx * scale)), gen,
                                ctx >= _PREFILL_ONLY)


class _Tier:
    def __init__(self, slots: int):
        self.slots = slots
        self.free = list(range(slots - 1, -1, -1))
        self.lru: "collections.OrderedDict[Tuple, _Entry]" = collections.OrderedDict()

    @property
    def used(self) -> int:
        return self.slots - len(self.free)

    def oldest_unpinned(self) -> Optional[Tuple[Tuple, _Entry]]:
        return next(((k, e) for k, e in self.lru.items() if e.pins == 0), None)


@dataclass
class _Log:
    """One client's record of a trial."""
    storage_read_ms: List[float] = field(default_factory=list)
    storage_write_ms: List[float] = field(default_factory=list)
    storage_read_bytes: int = 0
    storage_write_bytes: int = 0
    demoted_bytes: int = 0      # moved from the CPU tier to storage
    cpu_read_bytes: int = 0
    cpu_write_bytes: int = 0
    hits: int = 0
    misses: int = 0
    multi_turn_hits: int = 0
    multi_turn_misses: int = 0
    evictions: int = 0          # entries deleted from storage
    requests: int = 0
    tokens: int = 0             # generated
    request_ms: List[float] = field(default_factory=list)


class Client:
    """One trial of one client: its users, its request workers, its tiers."""

    def __init__(self, cfg, s, acc, client, volume: str, buf, arena):
        """`cfg`: the MlperfKvConfig; `s`: its effective settings (kvcache_mlperf._Run)."""
        self.cfg, self.s, self.acc, self.client, self.volume = cfg, s, acc, client, volume
        self.buf, self.arena = buf, arena
        self.seed = s.seed  # every trial the same seed, as the option's commands give it
        self.users = users(self.seed, s.users)
        self.cond = threading.Condition()
        self.cpu = _Tier(s.cpu_slots)
        self.storage = _Tier(s.storage_slots)
        self.entries: Dict[Tuple, _Entry] = {}
        self.next_id = 1
        self.log = _Log()
        self.queue: "queue.PriorityQueue" = queue.PriorityQueue()
        self.stop = threading.Event()
        self.error: Optional[BaseException] = None
        allocs = cfg.option.max_concurrent_allocs
        self.allocs = threading.Semaphore(allocs) if allocs else None
        self.timeout = cfg.target.timeout

    # ---- the users and the workers ----
    def run(self, barrier) -> Dict[str, Any]:
        workers = [threading.Thread(target=self._guard, args=(self._worker, w), daemon=True)
                   for w in range(min(len(self.users), MAX_WORKERS))]
        makers = [threading.Thread(target=self._guard, args=(self._user, u), daemon=True)
                  for u in self.users]
        barrier.wait(self.cfg.deadline_s)
        t0 = time.perf_counter()
        for t in workers + makers:
            t.start()
        self.stop.wait(self.s.duration_s)
        self.stop.set()
        for t in makers + workers:  # a worker ends after the request it is serving
            t.join()
        run_s = time.perf_counter() - t0
        if self.error is not None:
            raise self.error
        out = dict(vars(self.log), run_s=run_s)
        waits = out.pop("request_ms")
        out["request_p95_ms"] = percentile(waits, 95) if waits else None
        return out

    def _guard(self, body, arg) -> None:
        try:
            body(arg)
        except BaseException as e:  # the client's error: the first one ends the trial
            with self.cond:
                if self.error is None:
                    self.error = e
            self.stop.set()

    def _user(self, u: User) -> None:
        for think_s, r in requests(self.seed, u, self.cfg.scale):
            if self.stop.wait(think_s):
                return
            r.submitted = time.perf_counter()
            self.queue.put((-u.priority, r.submitted, id(r), r))

    def _worker(self, w: int) -> None:
        at = w * self.cfg.ring * self.cfg.chunk
        while not self.stop.is_set():
            try:
                r = self.queue.get(timeout=0.05)[-1]
            except queue.Empty:
                continue
            self._serve(r, at)

    def _serve(self, r: Request, at: int) -> None:
        log = self.log
        for turn in range(1, r.turn):  # the conversation so far, as much of it as is cached
            hit = self._read((r.conversation, turn), at)
            with self.cond:
                if hit:
                    log.multi_turn_hits += 1
                else:
                    log.multi_turn_misses += 1
        key = (r.conversation, r.turn)
        self._prefill(key, r.context, at)
        if not r.prefill_only:
            if not self._read(key, at):  # evicted already: written again, as the benchmark does
                self._prefill(key, r.context, at)
            else:
                for _ in range(math.ceil(r.generate / DECODE_BATCH)):
                    self._read(key, at)
        with self.cond:
            log.requests += 1
            log.tokens += r.generate
            log.request_ms.append((time.perf_counter() - r.submitted) * 1e3)

    # ---- the tiers ----
    def _prefill(self, key, tokens: int, at: int) -> None:
        if self.allocs is not None:
            self.allocs.acquire()
        try:
            e = self._place(key, tokens * self.s.bytes_per_token)
            if e is not None:
                try:
                    self._write(e, at)
                    with self.cond:
                        e.written = True
                        self.cond.notify_all()
                finally:
                    self._unpin(e)
        finally:
            if self.allocs is not None:
                self.allocs.release()

    def _place(self, key, size: int) -> Optional[_Entry]:
        """A new entry for `key` in the fastest tier with room, pinned (None: it exists)."""
        n = math.ceil(size / self.cfg.chunk)
        with self.cond:
            while self.cpu.slots and n <= _LARGEST * self.cpu.slots:
                if key in self.entries:  # checked again: a move down lets others in
                    return None
                if self.cpu.used + n <= _TARGET_USAGE * self.cpu.slots:
                    return self._add(key, size, "cpu", self.cpu,
                                     [self.cpu.free.pop() for _ in range(n)])
                old = self.cpu.oldest_unpinned()
                if old is None:
                    break
                self._demote(*old)
            if key in self.entries:
                return None
            return self._add(key, size, "storage", self.storage, self._room(n))

    def _add(self, key, size: int, tier: str, t: _Tier, slots: List[int]) -> _Entry:
        e = _Entry(self.next_id, size, tier, slots, pins=1)
        self.next_id += 1
        self.entries[key] = t.lru[key] = e
        return e

    def _room(self, n: int) -> List[int]:
        """`n` storage slots, taken (deleting the least recently used entries); called locked."""
        end = time.monotonic() + self.timeout
        while len(self.storage.free) < n:
            old = self.storage.oldest_unpinned()
            if old is None:
                if not self.cond.wait(end - time.monotonic()):
                    raise ResourceExhausted(
                        f"the storage tier of {self.storage.slots * self.cfg.chunk} bytes has "
                        f"no room for {n * self.cfg.chunk} bytes with every entry in use: "
                        "give a larger --storage-bytes")
                continue
            key, e = old
            del self.storage.lru[key], self.entries[key]
            self.storage.free.extend(e.slots)
            self.log.evictions += 1
        return [self.storage.free.pop() for _ in range(n)]

    def _demote(self, key, e: _Entry) -> None:
        """Moves `e` from the CPU tier to storage; called locked, the copy made unlocked."""
        e.pins += 1
        dest = self._room(len(e.slots))
        self.cond.release()
        try:
            with closing(self.client.stream(), f"closing the stream of {self.volume}") as s:
                futs = [s.put(self.arena, self.volume, d * self.cfg.chunk,
                              self._chunk_len(e, i), at=c * self.cfg.chunk)
                        for i, (c, d) in enumerate(zip(e.slots, dest))]
                for f in futs:
                    f.result()
        finally:
            self.cond.acquire()
        while e.pins > 1:  # a read of its CPU copy still in flight
            self.cond.wait()
        del self.cpu.lru[key]
        self.cpu.free.extend(e.slots)
        e.tier, e.slots = "storage", dest
        self.storage.lru[key] = e
        self.log.demoted_bytes += e.size
        e.pins -= 1
        self.cond.notify_all()

    def _unpin(self, e: _Entry) -> None:
        with self.cond:
            e.pins -= 1
            self.cond.notify_all()

    def _chunk_len(self, e: _Entry, i: int) -> int:
        return min(self.cfg.chunk, e.size - i * self.cfg.chunk)

    def _write(self, e: _Entry, at: int) -> None:
        chunk, ring = self.cfg.chunk, self.cfg.ring
        if e.tier == "cpu":
            for i, c in enumerate(e.slots):
                self._stamp(self.buf, at, e, i)
                _copy(self.arena, c * chunk, self.buf, at, self._chunk_len(e, i))
            with self.cond:
                self.log.cpu_write_bytes += e.size
            return
        t0 = time.perf_counter()
        with closing(self.client.stream(), f"closing the stream of {self.volume}") as s:
            window: "collections.deque" = collections.deque()
            for i, slot in enumerate(e.slots):
                if len(window) == ring:  # its ring place is free once its put is answered
                    window.popleft().result()
                place = at + (i % ring) * chunk
                self._stamp(self.buf, place, e, i)
                window.append(s.put(self.buf, self.volume, slot * chunk, self._chunk_len(e, i),
                                    at=place))
            for f in window:
                f.result()
        ms = (time.perf_counter() - t0) * 1e3
        with self.cond:
            self.log.storage_write_ms.append(ms)
            self.log.storage_write_bytes += e.size

    def _read(self, key, at: int) -> bool:
        """Reads the entry of `key` into the accelerator's memory; False when none is cached."""
        with self.cond:
            end = time.monotonic() + self.timeout
            while True:
                e = self.entries.get(key)
                if e is None:
                    self.log.misses += 1
                    return False
                if e.written:
                    break
                # Still being written by the worker that placed it (pinned, so not evicted
                # meanwhile; looked up again once written, as it may go after that).
                if not self.cond.wait(max(0.0, end - time.monotonic())):
                    raise DeadlineExceeded(
                        f"{self.volume}: entry {e.id} was not written within {self.timeout:g} s "
                        "of a read waiting for it")
            self.log.hits += 1
            e.pins += 1
            (self.cpu if e.tier == "cpu" else self.storage).lru.move_to_end(key)
            tier, slots = e.tier, list(e.slots)  # a pinned entry is not moved
        try:
            chunk, ring = self.cfg.chunk, self.cfg.ring
            if tier == "cpu":
                for i, c in enumerate(slots):
                    _copy(self.buf, at, self.arena, c * chunk, self._chunk_len(e, i))
                    self._verify(e, i, at)
                with self.cond:
                    self.log.cpu_read_bytes += e.size
                return True
            t0 = time.perf_counter()
            with closing(self.client.stream(), f"closing the stream of {self.volume}") as s:
                window: "collections.deque" = collections.deque()
                for i, slot in enumerate(slots):
                    if len(window) == ring:
                        self._landed(e, *window.popleft())
                    place = at + (i % ring) * chunk
                    window.append((i, place, s.get(self.volume, slot * chunk, self.buf,
                                                   self._chunk_len(e, i), at=place)))
                while window:
                    self._landed(e, *window.popleft())
            ms = (time.perf_counter() - t0) * 1e3
            with self.cond:
                self.log.storage_read_ms.append(ms)
                self.log.storage_read_bytes += e.size
            return True
        finally:
            self._unpin(e)

    def _landed(self, e: _Entry, i: int, place: int, fut) -> None:
        fut.result()
        self._verify(e, i, place)

    def _stamp(self, buf, place: int, e: _Entry, i: int) -> None:
        stamp = _STAMP.pack(_MAGIC, e.id, i)
        if self.acc.gpu is not None:
            import torch
            buf[place:place + len(stamp)].copy_(
                torch.frombuffer(bytearray(stamp), dtype=torch.uint8))
        else:
            buf[place:place + len(stamp)] = stamp

    def _verify(self, e: _Entry, i: int, place: int) -> None:
        want = _STAMP.pack(_MAGIC, e.id, i)
        have = self.acc.head(self.buf, place, len(want))
        if have != want:
            raise DataLoss(f"{self.volume}: chunk {i} of entry {e.id} ({e.tier} slot "
                           f"{e.slots[i]}) reads back another chunk's stamp")


def _copy(dst, dst_at: int, src, src_at: int, n: int) -> None:
    """Copies n bytes between the CPU tier (host memory) and the accelerator's memory (host
    memory, or a CUDA tensor)."""
    if hasattr(dst, "copy_") or hasattr(src, "copy_"):
        import torch
        d = dst if hasattr(dst, "copy_") else torch.frombuffer(dst, dtype=torch.uint8)
        s = src if hasattr(src, "copy_") else torch.frombuffer(src, dtype=torch.uint8)
        d[dst_at:dst_at + n].copy_(s[src_at:src_at + n])
    else:
        dst[dst_at:dst_at + n] = src[src_at:src_at + n]
