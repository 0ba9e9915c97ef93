"""A KV-cache tier in front of inference (as LMCache or Mooncake's store serve vLLM): each rank
is one serving instance with its own cache volume of `capacity` blocks. A request is a shared
prefix (one of `prefixes`, drawn Zipf-distributed from a seeded generator, each with its own
length) and a suffix of its own; its full blocks of `block_tokens` tokens are looked up in
order, and the longest run of cached blocks is a hit: those blocks are read from the store into
the accelerator's memory before the first token (the load time a reused prefix adds). The
blocks after it are computed (prefill) and put into the store, the least recently used block
giving way when the volume is full. An extra of this project: MLPerf Storage v3's KV-cache
options are kvcache_mlperf's."""

import collections
import itertools
import random
import struct
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import DataLoss, InvalidArgument
from . import ranks as rank_runner
from .cleanup import closing
from .device import Accelerator
from .models import KV, KvModel
from .stats import percentiles
from .target import Target, Volumes

_STAMP = struct.Struct("<8sQQ")  # magic, prefix key, block index
_MAGIC = b"GDRKVBL1"


@dataclass(frozen=True)
class KvConfig:
    model: KvModel
    target: Target
    ranks: int = 1
    gpus: Tuple[str, ...] = ()
    requests: int = 200            # per rank
    block_tokens: int = 16
    prefixes: int = 32             # distinct shared prefixes
    zipf: float = 1.0              # popularity exponent of the prefixes
    prefix_tokens: int = 1024      # mean prefix length (uniform in [mean/2, 3 mean/2])
    suffix_tokens: int = 128       # each request's own tokens
    capacity: int = 512            # blocks the cache volume of one rank holds
    seed: int = 1
    prefix: str = "workload"
    file: bool = False
    media: Optional[str] = None
    deadline_s: float = 3600.0
    keep: bool = False

    @property
    def block_bytes(self) -> int:
        return self.model.bytes_per_token * self.block_tokens


def model_named(name: str) -> KvModel:
    if name not in KV:
        raise InvalidArgument(f"--model {name!r} is not one of {', '.join(KV)}")
    return KV[name]


def requests(cfg: KvConfig, rank: int) -> List[Tuple[int, int, int]]:
    """Rank `rank`'s requests: (prefix id, prefix tokens, suffix tokens), from the seed."""
    weights = [1.0 / (i + 1) ** cfg.zipf for i in range(cfg.prefixes)]
    cum = list(itertools.accumulate(weights))
    lengths = random.Random(cfg.seed)
    lo, hi = max(1, cfg.prefix_tokens // 2), max(1, cfg.prefix_tokens * 3 // 2)
    plen = [lengths.randint(lo, hi) for _ in range(cfg.prefixes)]
    rng = random.Random(cfg.seed * 7919 + rank + 1)
    return [(p, plen[p], cfg.suffix_tokens)
            for p in rng.choices(range(cfg.prefixes), cum_weights=cum, k=cfg.requests)]


class _Cache:
    """Which blocks the rank's volume holds, in least-recently-used order."""

    def __init__(self, capacity: int):
        self._slots: "collections.OrderedDict[Tuple, int]" = collections.OrderedDict()
        self._free = list(range(capacity - 1, -1, -1))
        self.evictions = 0

    def lookup(self, key) -> Optional[int]:
        slot = self._slots.get(key)
        if slot is not None:
            self._slots.move_to_end(key)
        return slot

    def insert(self, key) -> int:
        if not self._free:
            _, slot = self._slots.popitem(last=False)
            self.evictions += 1
        else:
            slot = self._free.pop()
        self._slots[key] = slot
        return slot


def _stamp_of(key, j: int) -> bytes:
    kind, a, _ = key
    return _STAMP.pack(_MAGIC, (1 << 63 if kind == "u" else 0) | a, j)


def _rank(rank: int, ranks: int, cfg: KvConfig, barrier) -> Dict[str, Any]:
    acc = Accelerator(cfg.gpus[rank % len(cfg.gpus)] if cfg.gpus else None)
    with closing(cfg.target.path(), f"closing rank {rank}'s clients") as path:
        client = path.client(rank)
        volume = f"{cfg.prefix}-kv-{cfg.model.name}-{rank}"
        reqs = requests(cfg, rank)
        bb = cfg.block_bytes
        most = max(pl + sl for _, pl, sl in reqs) // cfg.block_tokens + 1
        buf = acc.buffer(path.clients[0], most * bb)
        client.register(buf)
        torch = None
        if acc.gpu is not None:
            import torch
        cache = _Cache(cfg.capacity)
        block_ms: List[float] = []
        load_ms: List[float] = []
        put_ms: List[float] = []
        hits = misses = reused_tokens = tokens = got = 0
        barrier.wait(cfg.deadline_s)
        t_start = time.perf_counter()
        for q, (pid, plen, slen) in enumerate(reqs):
            full = (plen + slen) // cfg.block_tokens
            shared = plen // cfg.block_tokens
            keys = [("p", pid, j) if j < shared else ("u", rank * 1_000_000 + q, j)
                    for j in range(full)]
            tokens += plen + slen
            run = []
            for j, key in enumerate(keys):
                slot = cache.lookup(key)
                if slot is None:
                    break
                run.append((j, slot))
            if run:
                t0 = time.perf_counter()
                with closing(client.stream(), f"closing the stream of {volume}") as s:
                    futs = [s.get(volume, slot * bb, buf, bb, at=j * bb) for j, slot in run]
                    s.wait_all()
                for f in futs:
                    got += int(f.result())
                    block_ms.append(f.latency * 1e3)
                load_ms.append((time.perf_counter() - t0) * 1e3)
                for j, slot in run:
                    want = _stamp_of(keys[j], j)
                    have = acc.head(buf, j * bb, len(want))
                    if have != want:
                        raise DataLoss(f"{volume} slot {slot}: block {j} of request {q} reads "
                                       "back another block's stamp")
            hits += len(run)
            reused_tokens += len(run) * cfg.block_tokens
            misses += len(keys) - len(run)
            new = keys[len(run):]
            if new:  # prefill computed these blocks: into the store with them
                t0 = time.perf_counter()
                puts = []
                with closing(client.stream(), f"closing the stream of {volume}") as s:
                    for j in range(len(run), len(keys)):
                        stamp = _stamp_of(keys[j], j)
                        at = j * bb
                        if torch is not None:
                            buf[at:at + len(stamp)].copy_(
                                torch.frombuffer(bytearray(stamp), dtype=torch.uint8))
                        else:
                            buf[at:at + len(stamp)] = stamp
                        slot = cache.insert(keys[j])
                        puts.append(s.put(buf, volume, slot * bb, bb, at=at))
                for f in puts:  # a failed put is the run's error, not a later miss's
                    f.result()
                put_ms.append((time.perf_counter() - t0) * 1e3)
        run_s = time.perf_counter() - t_start
        return {"rank": rank, "device": acc.name, "requests": len(reqs),
                "block_hits": hits, "block_misses": misses, "tokens": tokens,
                "reused_tokens": reused_tokens, "evictions": cache.evictions,
                "bytes_got": got, "run_s": run_s, "block_ms": block_ms, "load_ms": load_ms,
                "put_ms": put_ms}


def run(cfg: KvConfig) -> Dict[str, Any]:
    cfg.target.check()
    for name, v, lo, hi in [("--ranks", cfg.ranks, 1, 1024), ("--requests", cfg.requests, 1,
                             10_000_000), ("--block-tokens", cfg.block_tokens, 1, 65536),
                            ("--prefixes", cfg.prefixes, 1, 1_000_000),
                            ("--prefix-tokens", cfg.prefix_tokens, 1, 10_000_000),
                            ("--suffix-tokens", cfg.suffix_tokens, 0, 10_000_000),
                            ("--capacity", cfg.capacity, 1, 1 << 30)]:
        if not lo <= v <= hi:
            raise InvalidArgument(f"{name} {v} is outside [{lo}, {hi}]")
    if not 0 <= cfg.zipf <= 10:
        raise InvalidArgument(f"--zipf {cfg.zipf} is outside [0, 10]")
    with Volumes(cfg.target, cfg.file, cfg.media, cfg.keep) as vols:
        for r in range(cfg.ranks):
            vols.make(r, f"{cfg.prefix}-kv-{cfg.model.name}-{r}", cfg.capacity * cfg.block_bytes)
        per_rank = rank_runner.run(_rank, cfg.ranks, cfg, cfg.deadline_s)
    hits = sum(r["block_hits"] for r in per_rank)
    blocks = hits + sum(r["block_misses"] for r in per_rank)
    tokens = sum(r["tokens"] for r in per_rank)
    got = sum(r["bytes_got"] for r in per_rank)
    # The ranks start together at the barrier: the run's wall time is the longest rank's, and
    # the aggregate bandwidth is every rank's bytes over it (not over the sum of the ranks'
    # load times, which counts the time ranks overlap once per rank).
    wall_s = max(r["run_s"] for r in per_rank)
    out_ranks = [{k: v for k, v in r.items() if not k.endswith("_ms")} for r in per_rank]
    return {
        "workload": "kvcache", "model": cfg.model.name,
        "parameters": {"bytes_per_token": cfg.model.bytes_per_token,
                       "block_tokens": cfg.block_tokens, "block_bytes": cfg.block_bytes,
                       "requests_per_rank": cfg.requests, "prefixes": cfg.prefixes,
                       "zipf": cfg.zipf, "prefix_tokens": cfg.prefix_tokens,
                       "suffix_tokens": cfg.suffix_tokens, "capacity_blocks": cfg.capacity,
                       "seed": cfg.seed},
        "ranks": cfg.ranks, "compute": "gpu" if cfg.gpus else "host",
        "hit_rate": hits / blocks if blocks else 0.0,
        "reused_token_fraction": sum(r["reused_tokens"] for r in per_rank) / tokens
        if tokens else 0.0,
        "get_ms": percentiles([x for r in per_rank for x in r["block_ms"]]),
        "prefix_load_ms": percentiles([x for r in per_rank for x in r["load_ms"]]),
        "put_ms": percentiles([x for r in per_rank for x in r["put_ms"]]),
        "wall_s": wall_s,
        "get_gb_per_s": got / wall_s / 1e9 if wall_s > 0 else 0.0,
        "evictions": sum(r["evictions"] for r in per_rank),
        "per_rank": out_ranks,
        "latencies_ms": {"get": [x for r in per_rank for x in r["block_ms"]],
                         "prefix_load": [x for r in per_rank for x in r["load_ms"]]},
    }
