"""MLPerf Storage's checkpointing workload: every logical rank of a model's published layout
writes its shard (one volume each) out of its accelerator's memory, then, after what stands for
a cache clear, reads it back into that memory. Duration is the slowest process's and
throughput is the checkpoint's bytes over that duration, as MLPerf reports them. With fewer
processes than the model's ranks, process p takes logical ranks p, p + N, ..."""

import math
import struct
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import DataLoss, InvalidArgument
from . import ranks as rank_runner
from .cleanup import closing
from .device import Accelerator
from .models import CHECKPOINT, CheckpointModel
from .stats import percentiles
from .target import Target, Volumes

_STAMP = struct.Struct("<8sIII")  # magic, logical rank, checkpoint, chunk
_MAGIC = b"GDRCKPT1"
_ALIGN = 4096


@dataclass(frozen=True)
class CheckpointConfig:
    model: CheckpointModel
    target: Target
    ranks: int = 8                 # processes (simulated accelerators)
    gpus: Tuple[str, ...] = ()
    scale: float = 1.0             # of the published checkpoint size
    checkpoints: int = 1           # written, then read
    chunk: int = 64 << 20          # bytes per op
    qd: int = 4                    # ops in flight per process
    prefix: str = "workload"
    file: bool = False
    media: Optional[str] = None
    deadline_s: float = 3600.0
    keep: bool = False


def model_named(name: str) -> CheckpointModel:
    if name not in CHECKPOINT:
        raise InvalidArgument(f"--model {name!r} is not one of {', '.join(CHECKPOINT)}")
    return CHECKPOINT[name]


def shard_sizes(cfg: CheckpointConfig) -> List[int]:
    """Each logical rank's shard, scaled and rounded up to 4 KiB."""
    out = []
    for r in range(cfg.model.ranks):
        n = math.ceil(cfg.model.shard_bytes(r) * cfg.scale / _ALIGN) * _ALIGN
        out.append(max(_ALIGN, n))
    return out


def volume_name(cfg: CheckpointConfig, k: int, r: int) -> str:
    return f"{cfg.prefix}-ckpt-{cfg.model.name}-{k}-rank{r:05d}"


def _fill(r: int, k: int) -> int:
    return (r * 7 + k) % 251 + 1


def _chunks(size: int, chunk: int):
    for i, at in enumerate(range(0, size, chunk)):
        yield i, at, min(chunk, size - at)


class _Device:
    """A process's qd chunk buffers on its accelerator, stamped and checked in place."""

    def __init__(self, acc: Accelerator, client, chunk: int, qd: int):
        self.acc = acc
        self.bufs = [acc.buffer(client, chunk) for _ in range(qd)]
        self._filled = [None] * qd   # the fill value each buffer holds past its stamp
        self._expect = {}            # host: fill value -> the bytes a chunk past its stamp holds
        self._torch = None
        if acc.gpu is not None:
            import torch
            self._torch = torch

    def stamp(self, slot: int, r: int, k: int, i: int, n: int) -> None:
        buf, head, v = self.bufs[slot], _STAMP.pack(_MAGIC, r, k, i), _fill(r, k)
        if self._torch is not None:
            if self._filled[slot] != v:
                buf.fill_(v)
            buf[:len(head)].copy_(self._torch.frombuffer(bytearray(head), dtype=self._torch.uint8))
        else:
            if self._filled[slot] != v:
                buf[:] = self._expected(v, len(buf))
            buf[:len(head)] = head
        self._filled[slot] = v

    def _expected(self, v: int, n: int) -> bytes:
        e = self._expect.get(v)
        if e is None or len(e) < n:
            e = self._expect[v] = bytes([v]) * len(self.bufs[0])
        return e[:n] if n < len(e) else e

    def check(self, buf, r: int, k: int, i: int, n: int, volume: str, at: int) -> None:
        head = _STAMP.pack(_MAGIC, r, k, i)
        got = self.acc.head(buf, 0, len(head))
        if got != head:
            raise DataLoss(f"{volume} at {at}: the chunk's stamp is {got!r}, not {head!r} "
                           f"(rank {r}, checkpoint {k}, chunk {i})")
        v = _fill(r, k)
        if self._torch is not None:
            ok = bool((buf[len(head):n] == v).all().item())
        else:
            ok = buf[len(head):n] == memoryview(self._expected(v, len(self.bufs[0])))[len(head):n]
        if not ok:
            raise DataLoss(f"{volume} at {at}: chunk {i} of rank {r} differs from what was "
                           "written")


def _phase(rank: int, ranks: int, a, barrier) -> Dict[str, Any]:
    """One process: for each checkpoint, the puts (write) or gets (read) of its logical ranks'
    shards, qd chunks in flight; timed from a common start."""
    cfg, sizes, write = a
    acc = Accelerator(cfg.gpus[rank % len(cfg.gpus)] if cfg.gpus else None)
    with closing(cfg.target.path(), f"closing rank {rank}'s clients") as path:
        dev = _Device(acc, path.clients[0], cfg.chunk, cfg.qd)
        for b in dev.bufs:
            for c in path.clients:
                c.register(b)
        mine = list(range(rank, cfg.model.ranks, ranks))
        out = []
        for k in range(cfg.checkpoints):
            barrier.wait(cfg.deadline_s)
            t0 = time.perf_counter()
            moved, lat = 0, []
            for r in mine:
                client = path.client(r)
                name = volume_name(cfg, k, r)
                with closing(client.stream(), f"closing the stream of {name}") as s:
                    inflight: List[Tuple[Any, int, int, int, float, Any]] = []
                    for i, at, n in _chunks(sizes[r], cfg.chunk):
                        if len(inflight) == cfg.qd:
                            moved += _finish(dev, inflight.pop(0), r, k, name, write, lat)
                        buf = dev.bufs[i % cfg.qd]
                        if write:
                            dev.stamp(i % cfg.qd, r, k, i, n)
                            fut = s.put(buf, name, at, n)
                        else:
                            fut = s.get(name, at, buf, n)
                        inflight.append((fut, i, at, n, time.perf_counter(), buf))
                    while inflight:
                        moved += _finish(dev, inflight.pop(0), r, k, name, write, lat)
            out.append({"seconds": time.perf_counter() - t0, "bytes": moved,
                        "op_ms": percentiles(lat)})
        return {"rank": rank, "device": acc.name, "logical_ranks": mine, "checkpoints": out}


def _finish(dev: _Device, op, r: int, k: int, name: str, write: bool, lat: List[float]) -> int:
    fut, i, at, n, t, buf = op
    moved = int(fut.result())
    lat.append((time.perf_counter() - t) * 1e3)
    if not write:
        dev.check(buf, r, k, i, n, name, at)
    return moved


def _summary(per_rank: List[Dict[str, Any]], k: int, total: int) -> Dict[str, Any]:
    secs = [r["checkpoints"][k]["seconds"] for r in per_rank]
    slowest = max(secs)
    return {"checkpoint": k, "bytes": total, "duration_s": slowest,
            "gb_per_s": total / slowest / 1e9 if slowest > 0 else 0.0,
            "rank_gb_per_s": [r["checkpoints"][k]["bytes"] / r["checkpoints"][k]["seconds"] / 1e9
                              if r["checkpoints"][k]["seconds"] > 0 else 0.0 for r in per_rank]}


def run(cfg: CheckpointConfig) -> Dict[str, Any]:
    cfg.target.check()
    if not 0 < cfg.ranks <= 1024:
        raise InvalidArgument(f"--ranks {cfg.ranks} is outside [1, 1024]")
    if not 0 < cfg.scale <= 1:
        raise InvalidArgument(f"--scale {cfg.scale:g} is outside (0, 1]")
    if not 0 < cfg.checkpoints <= 100:
        raise InvalidArgument(f"--checkpoints {cfg.checkpoints} is outside [1, 100]")
    if not _ALIGN <= cfg.chunk <= (1 << 30) or cfg.chunk % _ALIGN:
        raise InvalidArgument(f"--chunk {cfg.chunk} is not a multiple of 4 KiB in [4 KiB, 1 GiB]")
    if not 0 < cfg.qd <= 64:
        raise InvalidArgument(f"--qd {cfg.qd} is outside [1, 64]")
    if cfg.file and cfg.target.cluster:
        raise InvalidArgument("--file with --cluster: the cache clear of file volumes is "
                              "offered on daemons, not on a cluster's members yet")
    ranks = min(cfg.ranks, cfg.model.ranks)
    sizes = shard_sizes(cfg)
    total = sum(sizes)
    with Volumes(cfg.target, cfg.file, cfg.media, cfg.keep) as vols:
        for k in range(cfg.checkpoints):
            for r, n in enumerate(sizes):
                vols.make(r, volume_name(cfg, k, r), n)
        writes = rank_runner.run(_phase, ranks, (cfg, sizes, True), cfg.deadline_s)
        t = time.perf_counter()
        vols.reopen()
        clear_s = time.perf_counter() - t
        reads = rank_runner.run(_phase, ranks, (cfg, sizes, False), cfg.deadline_s)
    m = cfg.model
    w = [_summary(writes, k, total) for k in range(cfg.checkpoints)]
    r = [_summary(reads, k, total) for k in range(cfg.checkpoints)]
    return {
        "workload": "checkpoint", "model": m.name,
        "parameters": {"published_bytes": m.total_bytes, "published_ranks": m.ranks,
                       "tensor": m.tensor, "pipeline": m.pipeline,
                       "data_parallel": m.data_parallel, "model_fraction": m.model_fraction,
                       "chunk": cfg.chunk, "qd": cfg.qd},
        "scale": cfg.scale, "scaled": cfg.scale != 1 or ranks != m.ranks,
        "ranks": ranks, "logical_ranks": m.ranks, "checkpoint_bytes": total,
        "shard_bytes": {"min": min(sizes), "max": max(sizes)},
        "cache_clear": ({"how": "file volumes synced, dropped from the page cache and served "
                         "again from their files", "seconds": clear_s} if cfg.file else
                        {"how": "none: memory volumes have no cache", "seconds": 0.0}),
        "write": {"per_checkpoint": w,
                  "gb_per_s": sum(x["gb_per_s"] for x in w) / len(w),
                  "duration_s": sum(x["duration_s"] for x in w) / len(w)},
        "read": {"per_checkpoint": r,
                 "gb_per_s": sum(x["gb_per_s"] for x in r) / len(r),
                 "duration_s": sum(x["duration_s"] for x in r) / len(r)},
        "per_rank": {"write": writes, "read": reads},
        "compute": "gpu" if cfg.gpus else "host",
    }
