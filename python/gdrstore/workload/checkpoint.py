"""MLPerf Storage's checkpointing workload as DLIO runs it (branch mlperf_storage_v2.0, which
mlcommons/storage pins). Every rank of the model's training layout is a process of its own and
writes the files DLIO writes for it (models.CheckpointModel.files), each file a volume, out of
its accelerator's memory; on file volumes every put is synced inside the timed save, as DLIO
fsyncs each file. After the rules' cache clear the ranks read the checkpoints back and check
every byte. Each checkpoint follows the interval (DLIO's time_between_checkpoints, spent as
compute) and a barrier; a rank's time runs from the barrier to its last file's answer.
Per checkpoint the duration is the slowest rank's and the throughput the checkpoint's GiB over
that (the least of the ranks' DLIO throughputs); the run reports the mean and standard
deviation over the checkpoints, as DLIO's summary does. A host that cannot hold every rank at
once runs the first N ranks of the layout (DLIO's subset mode) and says so."""

import math
import os
import queue
import statistics
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import DataLoss, InvalidArgument
from . import hosts, ranks as rank_runner
from .cleanup import closing
from .device import Accelerator
from .models import CHECKPOINT, CheckpointModel
from .stats import percentiles
from .target import Target, Volumes

_STAMP = struct.Struct("<8sIIII")  # magic, rank, checkpoint, file, chunk
_MAGIC = b"GDRCKPT2"
_ALIGN = 4096
GIB = 1 << 30
# The rules' closed run: 10 checkpoints written, 10 read, 5 s apart.
RULES_WRITES, RULES_READS, RULES_INTERVAL_S = 10, 10, 5.0
# What a rank's process holds besides its buffers (the interpreter, the library, a client: 40
# MiB resident, measured on Debian 12 with a connected client), with room to spare.
RANK_OVERHEAD = 128 << 20
# The share of the host's available memory the ranks may take.
_HOST_SHARE = 0.8


@dataclass(frozen=True)
class CheckpointConfig:
    model: CheckpointModel
    target: Target
    ranks: Optional[int] = None    # processes, a rank each; None: every rank of the layout
    gpus: Tuple[str, ...] = ()
    scale: float = 1.0             # of every file's bytes
    writes: int = RULES_WRITES     # checkpoints written (num_checkpoints_write)
    reads: int = RULES_READS       # of them read back (num_checkpoints_read)
    interval_s: float = RULES_INTERVAL_S  # compute before each (time_between_checkpoints)
    chunk: int = 64 << 20          # bytes per op
    qd: int = 4                    # ops in flight per rank
    prefix: str = "workload"
    file: bool = False
    media: Optional[str] = None
    deadline_s: float = 3600.0
    keep: bool = False


def model_named(name: str) -> CheckpointModel:
    if name not in CHECKPOINT:
        raise InvalidArgument(f"--model {name!r} is not one of {', '.join(CHECKPOINT)}")
    return CHECKPOINT[name]


def scaled(n: int, scale: float) -> int:
    """A file's bytes at `scale`, rounded up to 4 KiB (4 KiB at least)."""
    return max(_ALIGN, math.ceil(n * scale / _ALIGN) * _ALIGN)


def rank_files(cfg: CheckpointConfig, rank: int) -> List[Tuple[str, int]]:
    """(DLIO's file name, bytes at the run's scale) of each file `rank` writes."""
    return [(name, scaled(n, cfg.scale)) for name, n in cfg.model.files(rank)]


def volume_name(cfg: CheckpointConfig, k: int, file: str) -> str:
    return f"{cfg.prefix}-ckpt-{cfg.model.name}-{k}-{file}"


def host_memory(field: str = "MemAvailable") -> Optional[int]:
    """A /proc/meminfo figure of this host in bytes; None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == field:
                    return int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def ranks_held(cfg: CheckpointConfig, wanted: int, available: Optional[int]) -> int:
    """How many of `wanted` rank processes a host with `available` bytes free holds at once:
    each takes RANK_OVERHEAD and, on the host, its qd buffers."""
    if available is None:
        return wanted
    biggest = max(n for r in range(wanted) for _, n in rank_files(cfg, r))
    buffers = 0 if cfg.gpus else cfg.qd * min(cfg.chunk, biggest)
    return max(1, min(wanted, int(available * _HOST_SHARE) // (RANK_OVERHEAD + buffers)))


def _chunks(size: int, chunk: int):
    for i, at in enumerate(range(0, size, chunk)):
        yield i, at, min(chunk, size - at)


def _fill(r: int, k: int) -> int:
    return (r * 7 + k) % 251 + 1


class _Device:
    """A rank's qd chunk buffers on its accelerator, stamped and checked in place. A buffer is
    used by one op at a time (the slot queue hands them out)."""

    def __init__(self, acc: Accelerator, client, chunk: int, qd: int):
        self.acc = acc
        self.bufs = [acc.buffer(client, chunk) for _ in range(qd)]
        self._filled = [None] * qd   # the fill value each buffer holds past its stamp
        self._expect: Dict[int, bytes] = {}  # host: fill value -> a chunk's bytes of it
        self._torch = None
        if acc.gpu is not None:
            import torch
            self._torch = torch

    def stamp(self, slot: int, head: bytes, v: int) -> None:
        buf = self.bufs[slot]
        if self._torch is not None:
            if self._filled[slot] != v:
                buf.fill_(v)
            buf[:len(head)].copy_(self._torch.frombuffer(bytearray(head), dtype=self._torch.uint8))
        else:
            if self._filled[slot] != v:
                buf[:] = self._expected(v)
            buf[:len(head)] = head
        self._filled[slot] = v

    def _expected(self, v: int) -> bytes:
        e = self._expect.get(v)
        if e is None:
            e = self._expect[v] = bytes([v]) * len(self.bufs[0])
        return e

    def check(self, slot: int, head: bytes, v: int, n: int, where: str) -> None:
        buf = self.bufs[slot]
        self._filled[slot] = None
        got = self.acc.head(buf, 0, len(head))
        if got != head:
            raise DataLoss(f"{where}: the chunk's stamp is {got!r}, not {head!r}")
        if self._torch is not None:
            ok = bool((buf[len(head):n] == v).all().item())
        else:
            ok = buf[len(head):n] == memoryview(self._expected(v))[len(head):n]
        if not ok:
            raise DataLoss(f"{where}: the chunk differs from what was written")


def _op(dev: _Device, client, slots: "queue.SimpleQueue[int]", write: bool, sync: bool,
        rank: int, k: int, f: int, name: str, i: int, at: int, n: int) -> Tuple[int, float]:
    """One chunk's put (synced when `sync`) or get and check; the bytes moved and its ms."""
    slot = slots.get()
    try:
        head, v = _STAMP.pack(_MAGIC, rank, k, f, i), _fill(rank, k)
        buf = dev.bufs[slot]
        if write:
            dev.stamp(slot, head, v)
            t = time.perf_counter()
            moved = client.put(buf, name, at, n, sync=sync)
        else:
            t = time.perf_counter()
            moved = client.get(name, at, buf, n)
        ms = (time.perf_counter() - t) * 1e3
        if not write:
            dev.check(slot, head, v, n, f"{name} at {at} (rank {rank}, checkpoint {k}, "
                                        f"chunk {i})")
        return int(moved), ms
    finally:
        slots.put(slot)


def _bind(acc: Accelerator) -> None:
    """An op thread's current CUDA device is its rank's GPU, where torch stamps and checks the
    chunks and the library copies them (a new thread starts on device 0)."""
    if acc.gpu is not None:
        import torch
        torch.cuda.set_device(acc.device)


def _rank(rank: int, ranks: int, a, barrier) -> Dict[str, Any]:
    """One rank: per checkpoint the interval's compute, the barrier, then its files one after
    another (as torch.save writes them), qd chunks of a file in flight."""
    cfg, files, write, count = a
    mine = files[rank]
    acc = Accelerator(cfg.gpus[rank % len(cfg.gpus)] if cfg.gpus else None)
    size = min(cfg.chunk, max(n for _, n in mine))
    sync = write and cfg.file
    with closing(cfg.target.path(), f"closing rank {rank}'s clients") as path:
        client = path.client(rank)
        dev = _Device(acc, client, size, cfg.qd)
        for b in dev.bufs:
            client.register(b)
        slots: "queue.SimpleQueue[int]" = queue.SimpleQueue()
        for s in range(cfg.qd):
            slots.put(s)
        out = []
        with ThreadPoolExecutor(cfg.qd, thread_name_prefix=f"rank{rank}", initializer=_bind,
                                initargs=(acc,)) as pool:
            for k in range(count):
                acc.compute(cfg.interval_s)
                ready = time.time()
                barrier.wait(cfg.deadline_s)
                start, t0 = time.time(), time.perf_counter()
                moved, puts, lat = 0, 0, []
                for f, (stem, n) in enumerate(mine):
                    name = volume_name(cfg, k, stem)
                    ops = [pool.submit(_op, dev, client, slots, write, sync, rank, k, f, name,
                                       i, at, m) for i, at, m in _chunks(n, size)]
                    for op in ops:  # the file is done (and synced) when its last op is
                        m, ms = op.result()
                        moved, puts = moved + m, puts + 1
                        lat.append(ms)
                seconds = time.perf_counter() - t0
                out.append({"checkpoint": k, "ready": ready, "start": start, "end": time.time(),
                            "seconds": seconds, "bytes": moved, "ops": puts,
                            "synced_puts": puts if sync else 0, "op_ms": percentiles(lat)})
    mp = cfg.model.tensor * cfg.model.pipeline
    return {"rank": rank, "pid": os.getpid(), "device": acc.name, "dp_rank": rank // mp,
            "mp_rank": rank % mp, "files": [stem for stem, _ in mine],
            "bytes": sum(n for _, n in mine), "checkpoints": out}


def _mean_stdev(values: List[float]) -> Dict[str, float]:
    # Population deviation, as DLIO's numpy.std.
    return {"mean": statistics.fmean(values), "stdev": statistics.pstdev(values)}


def _phase(per_rank: List[Dict[str, Any]], total: int) -> Dict[str, Any]:
    """Per checkpoint: the slowest rank's duration, and the least of the ranks' throughputs
    (DLIO's per rank: the whole checkpoint's GiB over the rank's own time)."""
    rows = []
    for k in range(len(per_rank[0]["checkpoints"])):
        secs = [r["checkpoints"][k]["seconds"] for r in per_rank]
        rates = [total / GIB / max(s, 1e-9) for s in secs]
        rows.append({"checkpoint": k, "bytes": sum(r["checkpoints"][k]["bytes"]
                                                   for r in per_rank),
                     "duration_s": max(secs), "gib_per_s": min(rates),
                     "rank_seconds": secs})
    return {"per_checkpoint": rows,
            "duration_s": _mean_stdev([x["duration_s"] for x in rows]),
            "gib_per_s": _mean_stdev([x["gib_per_s"] for x in rows])}


def _check(cfg: CheckpointConfig) -> None:
    cfg.target.check()
    m = cfg.model
    if cfg.ranks is not None and not 0 < cfg.ranks <= m.ranks:
        raise InvalidArgument(f"--ranks {cfg.ranks} is outside [1, {m.ranks}]: {m.name}'s "
                              f"layout has {m.ranks} ranks (fewer run the first of them)")
    if not 0 < cfg.scale <= 1:
        raise InvalidArgument(f"--scale {cfg.scale:g} is outside (0, 1]")
    if not 0 < cfg.writes <= 100:
        raise InvalidArgument(f"--num-checkpoints-write {cfg.writes} is outside [1, 100]")
    if not 0 <= cfg.reads <= cfg.writes:
        raise InvalidArgument(f"--num-checkpoints-read {cfg.reads} is outside [0, "
                              f"{cfg.writes}]: it reads back checkpoints this run wrote")
    if not (math.isfinite(cfg.interval_s) and 0 <= cfg.interval_s <= 3600):
        raise InvalidArgument(f"--interval {cfg.interval_s:g} s is outside [0, 3600]")
    if not _ALIGN <= cfg.chunk <= (1 << 30) or cfg.chunk % _ALIGN:
        raise InvalidArgument(f"--chunk {cfg.chunk} is not a multiple of 4 KiB in [4 KiB, 1 GiB]")
    if not 0 < cfg.qd <= 64:
        raise InvalidArgument(f"--qd {cfg.qd} is outside [1, 64]")
    if cfg.file and cfg.target.cluster:
        raise InvalidArgument("--file with --cluster: the cache clear of file volumes is "
                              "offered on daemons, not on a cluster's members yet")


def run(cfg: CheckpointConfig) -> Dict[str, Any]:
    _check(cfg)
    m = cfg.model
    session = hosts.session()
    if session is None:
        wanted = m.ranks if cfg.ranks is None else cfg.ranks
        n = ranks_held(cfg, wanted, host_memory())
    else:
        # The launcher placed the processes, a rank each: this host's memory is not the
        # question, and every process must size the same ranks.
        wanted = n = min(m.ranks, session.world) if cfg.ranks is None else cfg.ranks
    files = [rank_files(cfg, r) for r in range(n)]
    total = sum(b for fs in files for _, b in fs)
    devs = deviations(cfg, wanted, n, total)
    ram = host_memory("MemTotal")
    clear: Dict[str, Any] = {
        # The rules: clear the cache when the checkpoint per client host is under 3x its RAM.
        "rules_require": ram is None or total / hosts.client_hosts() < 3 * ram,
        "done": False, "seconds": 0.0,
        "how": "nothing to clear: a memory volume is the memory its bytes live in, with no "
               "cache in front of it"}
    with Volumes(cfg.target, cfg.file, cfg.media, cfg.keep) as vols:
        for k in range(cfg.writes):
            for r, fs in enumerate(files):
                for stem, b in fs:
                    vols.make(r, volume_name(cfg, k, stem), b)
        writes = rank_runner.run(_rank, n, (cfg, files, True, cfg.writes), cfg.deadline_s)
        reads: List[Dict[str, Any]] = []
        if cfg.reads:
            if cfg.file:
                t = time.perf_counter()
                vols.reopen()
                clear.update(done=True, seconds=time.perf_counter() - t,
                             how="every file volume synced, dropped from the daemon's page "
                                 "cache and served again from its file")
            reads = rank_runner.run(_rank, n, (cfg, files, False, cfg.reads), cfg.deadline_s)
            if cfg.file:
                locked = page_locked(cfg.target, {volume_name(cfg, k, stem)
                                                  for k in range(cfg.reads)
                                                  for fs in files for stem, _ in fs})
                clear["page_locked_bytes"] = locked
                if locked:
                    devs.append(f"the daemons page-locked {locked / GIB:.3f} GiB of the read "
                                "volumes for the local transport's GPU copies, reading their "
                                "files back into memory in the background: reads after the "
                                "cache clear may have come from memory (gdrstored "
                                "--local-lock-budget 0 keeps them on the device)")
    synced = sum(c["synced_puts"] for r in writes for c in r["checkpoints"])
    return {
        "workload": "checkpoint", "model": m.name,
        "closed": not devs, "deviations": devs,
        "parameters": {"layers": m.layers, "hidden": m.hidden, "ffn": m.ffn,
                       "heads": m.heads, "kv_heads": m.kv_heads, "vocab": m.vocab,
                       "tensor": m.tensor, "pipeline": m.pipeline, "data_parallel": m.data,
                       "zero_stage": m.zero_stage, "model_ranks": m.ranks,
                       "stated_size": m.stated, "writes": cfg.writes, "reads": cfg.reads,
                       "interval_s": cfg.interval_s, "chunk": cfg.chunk, "qd": cfg.qd},
        "scale": cfg.scale, "scaled": cfg.scale != 1 or n != m.ranks,
        "ranks": n, "model_ranks": m.ranks,
        "published_bytes": m.total_bytes, "published_gib": m.total_bytes / GIB,
        "checkpoint_bytes": total, "checkpoint_gib": total / GIB,
        "rank_bytes": {"min": min(sum(b for _, b in fs) for fs in files),
                       "max": max(sum(b for _, b in fs) for fs in files)},
        "sync": ({"how": "every put into a file volume is msync'ed by the daemon before it is "
                         "answered, so a file is on disk when its last put is answered, inside "
                         "the timed save", "synced_puts": synced} if cfg.file else
                 {"how": "none: memory volumes have nothing to sync", "synced_puts": 0}),
        "cache_clear": clear,
        "write": _phase(writes, total),
        "read": _phase(reads, total) if reads else None,
        "per_rank": {"write": writes, "read": reads},
        "compute": "gpu" if cfg.gpus else "host",
    }


def page_locked(target: Target, names) -> int:
    """Bytes of volumes `names` the daemons hold page-locked for the local transport's GPU
    copies (GetStats). Locking a file volume's pages faults them in from its file, in the
    background, so a cache clear does not keep the next reads on the device."""
    if target.cluster:
        return 0
    total = 0
    admins = target.admin_clients()
    try:
        for c in admins:
            for v in c.stats().get("volumes", []):
                if v.get("name") in names:
                    total += int(v.get("page_locked_bytes", 0))
    finally:
        for c in admins:
            c.close()
    return total


def deviations(cfg: CheckpointConfig, wanted: int, n: int, total: int) -> List[str]:
    """Every way the run differs from the rules' closed checkpointing run."""
    m, out = cfg.model, []
    if cfg.scale != 1:
        out.append(f"--scale {cfg.scale:g}: every file {cfg.scale:g} of DLIO's size, rounded "
                   f"up to 4 KiB ({total / GIB:.4g} GiB written per checkpoint)")
    if wanted < m.ranks:
        out.append(f"{wanted} ranks: ranks 0-{wanted - 1} of the {m.ranks} (DLIO's subset "
                   "mode)")
    if n < wanted:
        out.append(f"this host holds {n} of the {wanted} rank processes at once (each "
                   f"{RANK_OVERHEAD >> 20} MiB and its buffers, within {_HOST_SHARE:.0%} of "
                   f"its available memory): ranks 0-{n - 1} of the {m.ranks} ran (DLIO's "
                   "subset mode)")
    if cfg.writes != RULES_WRITES:
        out.append(f"--num-checkpoints-write {cfg.writes} (the rules: {RULES_WRITES})")
    if cfg.reads != RULES_READS:
        out.append(f"--num-checkpoints-read {cfg.reads} (the rules: {RULES_READS})")
    if cfg.interval_s != RULES_INTERVAL_S:
        out.append(f"--interval {cfg.interval_s:g} s between checkpoints (the rules: "
                   f"{RULES_INTERVAL_S:g} s)")
    if not cfg.file:
        out.append("memory volumes: the checkpoint does not reach stable storage (nothing to "
                   "sync, no cache to clear); --file writes file volumes, synced")
    return out


def table(r: Dict[str, Any]) -> List[str]:
    """The result's lines as a person reads them."""
    lines = [f"checkpoint {r['model']}: {r['checkpoint_gib']:.3f} GiB from {r['ranks']} ranks "
             f"at once (the layout has {r['model_ranks']}; DLIO's full checkpoint is "
             f"{r['published_gib']:.1f} GiB, the rules state {r['parameters']['stated_size']})"]
    lines.append(f"  {'closed' if r['closed'] else 'open'}" +
                 "".join(f"\n    - {d}" for d in r["deviations"]))
    lines.append(f"  sync: {r['sync']['how']}")
    lines.append(f"  cache clear: {r['cache_clear']['how']}")
    for phase in ("write", "read"):
        p = r[phase]
        if p is None:
            continue
        for c in p["per_checkpoint"]:
            lines.append(f"  {phase:>5} #{c['checkpoint']}: {c['duration_s']:.3f} s (slowest "
                         f"rank), {c['gib_per_s']:.3f} GiB/s")
        lines.append(f"  {phase:>5}: {p['gib_per_s']['mean']:.3f} +- {p['gib_per_s']['stdev']:.3f}"
                     f" GiB/s, {p['duration_s']['mean']:.3f} +- {p['duration_s']['stdev']:.3f} s")
    return lines


def plot(r: Dict[str, Any], plt, save) -> str:
    """Each rank's time per checkpoint, written and read; `save(fig, name)` writes it."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for phase in ("write", "read"):
        for x in r["per_rank"][phase]:
            ax.plot([c["checkpoint"] for c in x["checkpoints"]],
                    [c["seconds"] for c in x["checkpoints"]], marker=".",
                    color="tab:blue" if phase == "write" else "tab:orange", alpha=0.6)
    ax.plot([], [], color="tab:blue", label="write")
    ax.plot([], [], color="tab:orange", label="read")
    ax.set_xlabel("checkpoint")
    ax.set_ylabel("rank's time (s)")
    ax.set_title(f"{r['model']} checkpoint: each rank's time")
    ax.legend()
    return save(fig, "checkpoint.png")
