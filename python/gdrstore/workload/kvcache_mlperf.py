"""MLPerf Storage v3's KV-cache benchmark (mlcommons/storage, kv_cache_benchmark) in its three
options: each rank is one client serving `users` simulated users. A user thinks, then asks; a
request may continue the user's conversation. Serving it reads back every earlier turn's KV
entry still cached, writes the request's own entry (prefill: context tokens x KV bytes a token)
to the fastest tier with room, then reads that entry once and again for every 32 tokens
generated (decode). Tiers are the CPU's memory (when the option has one; least recently used
entries move down to storage) and storage: a volume of the daemons, whose reads land in the
accelerator's memory. Scored as the benchmark scores it: storage read bandwidth (bytes over the
run's wall time), P95 read and write latency of storage (the largest rank's P95) and tokens
generated a second, each trial on its own, the median of the trials passed on."""

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import InvalidArgument
from . import ranks as rank_runner
from .cleanup import closing
from .device import Accelerator
from .kvcache_serving import DECODE_BATCH, MAX_TURNS, MAX_WORKERS, USER_TYPES, Client
from .models import KV, KvModel
from .stats import percentile
from .target import Target, Volumes

_GIB = 1 << 30


@dataclass(frozen=True)
class KvOption:
    """One of MLPerf Storage v3's KV-cache options, as its submission commands give it."""
    name: str
    model: str                  # the benchmark's model name
    kv: KvModel                 # its KV per token (same layers, KV heads, head size)
    users: int                  # per client
    cpu_bytes: int              # the CPU tier (0: none)
    max_concurrent_allocs: int  # prefill writes in flight per client (0: no bound)
    gpu_bytes: int = 0          # the GPU tier: 0 in every option
    duration_s: float = 300.0
    seed: int = 42
    trials: int = 3


OPTIONS: Dict[str, KvOption] = {o.name: o for o in [
    KvOption("8b-200u", "llama3.1-8b", KV["llama3-8b"], 200, 0, 16),
    KvOption("8b-100u-cpu4g", "llama3.1-8b", KV["llama3-8b"], 100, 4 * _GIB, 0),
    KvOption("70b-70u", "llama3.1-70b-instruct", KV["llama3-70b"], 70, 0, 4),
]}


@dataclass(frozen=True)
class MlperfKvConfig:
    option: KvOption
    target: Target
    ranks: int = 1                      # clients, one process each
    gpus: Tuple[str, ...] = ()
    prefix: str = "workload"
    file: bool = False
    media: Optional[str] = None
    deadline_s: float = 3600.0
    keep: bool = False
    users: Optional[int] = None         # per client (None: the option's)
    duration_s: Optional[float] = None  # per trial (None: the option's 300 s)
    trials: Optional[int] = None        # None: the option's 3
    seed: Optional[int] = None          # None: the option's 42
    scale: float = 1.0                  # of every request's context and of the CPU tier
    chunk: int = 4 << 20                # bytes an entry moves in per op
    ring: int = 4                       # chunks in flight per request
    storage_bytes: Optional[int] = None  # the storage tier per client (None: 64 GiB x scale)
    cpu_bytes: Optional[int] = None     # the CPU tier per client (None: the option's x scale)


def option_named(name: str) -> KvOption:
    if name not in OPTIONS:
        raise InvalidArgument(f"--option {name!r} is not one of {', '.join(OPTIONS)}")
    return OPTIONS[name]


@dataclass(frozen=True)
class _Run:
    """A configuration's effective settings (the option's where the config leaves them)."""
    users: int
    duration_s: float
    trials: int
    seed: int
    bytes_per_token: int
    cpu_slots: int
    storage_slots: int


def _settings(cfg: MlperfKvConfig) -> _Run:
    o = cfg.option
    pick = lambda given, default: default if given is None else given  # noqa: E731
    storage = pick(cfg.storage_bytes, max(1, int(64 * _GIB * cfg.scale)))
    cpu = pick(cfg.cpu_bytes, int(o.cpu_bytes * cfg.scale))
    return _Run(pick(cfg.users, o.users), float(pick(cfg.duration_s, o.duration_s)),
                pick(cfg.trials, o.trials), pick(cfg.seed, o.seed), o.kv.bytes_per_token,
                cpu // cfg.chunk, storage // cfg.chunk)


def largest_entry(cfg: MlperfKvConfig) -> int:
    """The bytes of the longest context a user can have, at the config's scale."""
    tokens = max(hi for (_, hi), _, _ in USER_TYPES.values())
    return max(1, int(tokens * cfg.scale)) * cfg.option.kv.bytes_per_token


def _check(cfg: MlperfKvConfig) -> _Run:
    cfg.target.check()
    for name, v, lo, hi in [("--ranks", cfg.ranks, 1, 1024), ("--users", cfg.users, 1, 10_000),
                            ("--trials", cfg.trials, 1, 100), ("--seed", cfg.seed, 0, 2 ** 63),
                            ("--chunk", cfg.chunk, 4096, 64 << 20),
                            ("--storage-bytes", cfg.storage_bytes, 1, 1 << 50),
                            ("--cpu-bytes", cfg.cpu_bytes, 0, 1 << 50),
                            ("--ring", cfg.ring, 1, 1024)]:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or
                              not lo <= v <= hi):
            raise InvalidArgument(f"{name} {v!r} is outside [{lo}, {hi}]")
    if cfg.duration_s is not None and not 0 < cfg.duration_s <= 86400:
        raise InvalidArgument(f"--duration {cfg.duration_s} s is outside (0, 86400]")
    if not 0 < cfg.scale <= 1:
        raise InvalidArgument(f"--scale {cfg.scale} is outside (0, 1]")
    s = _settings(cfg)
    need = math.ceil(largest_entry(cfg) / cfg.chunk) * 2
    if s.storage_slots < need:
        raise InvalidArgument(f"a storage tier of {s.storage_slots * cfg.chunk} bytes (whole "
                              "chunks of --storage-bytes) holds fewer than two of the largest "
                              f"entries ({largest_entry(cfg)} bytes at --scale {cfg.scale:g}): "
                              f"give --storage-bytes {need * cfg.chunk} or more")
    return s


def deviations(cfg: MlperfKvConfig) -> List[str]:
    """What makes a run of `cfg` differ from the option's closed run, each in words."""
    o, s = cfg.option, _settings(cfg)
    out = ["storage is a gdrstored volume per client (simulated media unless --file/--media), "
           "not .npy files under --cache-dir; entries move in chunks of "
           f"{cfg.chunk} bytes, {cfg.ring} in flight, not one file read or write",
           f"the storage tier holds {s.storage_slots * cfg.chunk} bytes per client, its least "
           "recently used entries deleted when full (the benchmark: the file system's space)",
           "no system-prompt prefix reuse (the benchmark's: a few tokens on 20 % of requests)"]
    if s.duration_s != o.duration_s:
        out.append(f"duration: {s.duration_s:g} s a trial, not {o.duration_s:g} s")
    if s.users != o.users:
        out.append(f"users per client: {s.users}, not {o.users}")
    if s.trials != o.trials:
        out.append(f"trials: {s.trials}, not {o.trials}")
    if s.seed != o.seed:
        out.append(f"seed: {s.seed}, not {o.seed}")
    if cfg.cpu_bytes is not None and cfg.cpu_bytes != int(o.cpu_bytes * cfg.scale):
        out.append(f"a CPU tier of {s.cpu_slots * cfg.chunk} bytes per client, not "
                   f"{int(o.cpu_bytes * cfg.scale)}")
    if cfg.scale != 1:
        out.append(f"every request's context (so its entry's bytes) and the CPU tier scaled by "
                   f"{cfg.scale:g}")
    if cfg.gpus:
        out.append("entries read from storage land in GPU memory (the accelerator's), not in "
                   "host NumPy arrays; the GPU cache tier stays 0 GiB as the option sets it")
    return out


def _volume(cfg: MlperfKvConfig, rank: int) -> str:
    return f"{cfg.prefix}-kvml-{cfg.option.name}-{rank}"


def _rank(rank: int, ranks: int, cfg: MlperfKvConfig, barrier) -> Dict[str, Any]:
    s = _settings(cfg)
    acc = Accelerator(cfg.gpus[rank % len(cfg.gpus)] if cfg.gpus else None)
    with closing(cfg.target.path(), f"closing rank {rank}'s clients") as path:
        client = path.client(rank)
        workers = min(s.users, MAX_WORKERS)
        buf = acc.buffer(path.clients[0], workers * cfg.ring * cfg.chunk)
        client.register(buf)
        arena = None
        if s.cpu_slots:
            arena = path.clients[0].allocate(s.cpu_slots * cfg.chunk)
            client.register(arena)
        trials = [Client(cfg, s, acc, client, _volume(cfg, rank), buf, arena).run(barrier)
                  for _ in range(s.trials)]
        return {"rank": rank, "device": acc.name, "trials": trials}


def _largest_p95(per_rank: List[Dict[str, Any]], what: str) -> Optional[float]:
    p = [percentile(x[what], 95) for x in per_rank if x[what]]
    return max(p) if p else None


def score(per_rank: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A trial's figures from its clients' logs. The clients start together at a barrier, so
    the trial's wall time is the longest client's."""
    wall = max(x["run_s"] for x in per_rank)
    read = sum(x["storage_read_bytes"] for x in per_rank)
    tokens = sum(x["tokens"] for x in per_rank)
    return {"wall_s": wall, "storage_read_bytes": read,
            "storage_write_bytes": sum(x["storage_write_bytes"] for x in per_rank),
            "read_gib_per_s": read / wall / _GIB,
            "read_p95_ms": _largest_p95(per_rank, "storage_read_ms"),
            "write_p95_ms": _largest_p95(per_rank, "storage_write_ms"),
            "tokens": tokens, "tokens_per_s": tokens / wall,
            "requests": sum(x["requests"] for x in per_rank)}


_SCORED = ("read_gib_per_s", "read_p95_ms", "write_p95_ms", "tokens_per_s")


def run(cfg: MlperfKvConfig) -> Dict[str, Any]:
    s = _check(cfg)
    with Volumes(cfg.target, cfg.file, cfg.media, cfg.keep) as vols:
        for r in range(cfg.ranks):
            vols.make(r, _volume(cfg, r), s.storage_slots * cfg.chunk)
        per_rank = rank_runner.run(_rank, cfg.ranks, cfg, cfg.deadline_s)
    trials = []
    for t in range(s.trials):
        logs = [dict(x["trials"][t], rank=x["rank"], device=x["device"]) for x in per_rank]
        trials.append(dict(score(logs), trial=t, per_rank=logs))
    summary = {}
    for k in _SCORED:
        vals = [t[k] for t in trials if t[k] is not None]
        summary[k] = {"median": statistics.median(vals) if vals else None,
                      "mean": statistics.mean(vals) if vals else None,
                      "stdev": statistics.stdev(vals) if len(vals) > 1 else
                      (0.0 if vals else None)}
    o, dev = cfg.option, deviations(cfg)
    return {
        "workload": "kvcache", "option": o.name, "model": o.model, "ranks": cfg.ranks,
        "compute": "gpu" if cfg.gpus else "host", "closed": not dev, "deviations": dev,
        "parameters": {"users_per_client": s.users, "duration_s": s.duration_s,
                       "trials": s.trials, "seed": s.seed, "scale": cfg.scale,
                       "bytes_per_token": s.bytes_per_token, "gpu_tier_bytes": o.gpu_bytes,
                       "cpu_tier_bytes": s.cpu_slots * cfg.chunk,
                       "storage_tier_bytes": s.storage_slots * cfg.chunk,
                       "max_concurrent_allocs": o.max_concurrent_allocs,
                       "chunk_bytes": cfg.chunk, "ring": cfg.ring,
                       "max_turns": MAX_TURNS, "decode_batch_tokens": DECODE_BATCH},
        # The scored figures: the median over the trials.
        **{k: summary[k]["median"] for k in _SCORED},
        "summary": summary, "trials": trials,
        "latencies_ms": {"storage read": [v for t in trials for x in t["per_rank"]
                                          for v in x["storage_read_ms"]],
                         "storage write": [v for t in trials for x in t["per_rank"]
                                           for v in x["storage_write_ms"]]},
    }


def table_lines(r: Dict[str, Any]) -> List[str]:
    """The result as gdrctl workload prints it."""
    p = r["parameters"]
    ms = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    lines = [f"kvcache {r['option']} ({r['model']}): {r['ranks']} clients x "
             f"{p['users_per_client']} users, {p['trials']} trials of {p['duration_s']:g} s, "
             f"CPU tier {p['cpu_tier_bytes'] / _GIB:.3g} GiB, "
             f"{'closed' if r['closed'] else 'open'}",
             f"  {'trial':>5} {'read GiB/s':>11} {'read p95 ms':>12} {'write p95 ms':>13} "
             f"{'tokens/s':>10} {'requests':>9}"]
    for t in r["trials"]:
        lines.append(f"  {t['trial']:>5} {t['read_gib_per_s']:>11.3f} {ms(t['read_p95_ms']):>12} "
                     f"{ms(t['write_p95_ms']):>13} {t['tokens_per_s']:>10.1f} "
                     f"{t['requests']:>9}")
    lines.append(f"  median: {r['read_gib_per_s']:.3f} GiB/s read, P95 read "
                 f"{ms(r['read_p95_ms'])} ms, write {ms(r['write_p95_ms'])} ms (largest "
                 f"client's), {r['tokens_per_s']:.1f} tokens/s")
    lines.extend(f"  deviation: {d}" for d in r["deviations"])
    return lines
