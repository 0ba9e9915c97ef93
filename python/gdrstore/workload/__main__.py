"""`python3 -m gdrstore.workload train|checkpoint|kvcache ...` (what `gdrctl workload` runs):
the result as a table on stdout (or JSON with --json), result.json and PNG plots under --out.
Exit status 0 when the run completed (and, for train, passed its AU threshold), 1 when a train
run completed below it, 2 on a usage error, 3 when the run failed. A failed run's stderr leads
with the error that ended it (the first failed rank's, naming the rank and its status); errors
of the clean-up after it (the volumes' removal with the daemon gone) follow, never in its place."""

import argparse
import json
import os
import re
import sys
import traceback
from typing import List, Optional

from ..errors import Error, InvalidArgument
from . import checkpoint, kvcache, kvcache_mlperf, report, search, train
from . import hosts
from .cleanup import Cleanup, notes
from .device import gpu_list
from .target import Target

_UNITS = {"": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000 ** 2, "mb": 1000 ** 2,
          "mib": 1024 ** 2, "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3}


def size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9]+)\s*([A-Za-z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 4096, 64MiB, 2GB)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument("--daemon", action="append", default=[], metavar="HOST:PORT",
                   help="a daemon (repeat for several: volumes are laid out over them in turn)")
    g.add_argument("--transport", default="tcp", help="tcp|rc|dc|local|auto")
    g.add_argument("--agent", help="the node agent's socket: every op goes through it")
    g.add_argument("--cluster", metavar="etcd://HOST:PORT/PREFIX",
                   help="a cluster instead of daemons: volumes striped over its members")
    g.add_argument("--local-socket", help="transport local's socket, if not the daemon's")
    g.add_argument("--require", help="terms every op's path must meet (e.g. local, agent)")
    g.add_argument("--token-file")
    g.add_argument("--tls-ca")
    g.add_argument("--tls-cert")
    g.add_argument("--tls-key")
    g.add_argument("--tls-server-name")
    g.add_argument("--rdma-device", help="rc/dc: the RDMA device (default: as the library picks)")
    g.add_argument("--crc", action="store_true", help="CRC32C of every op checked")
    g.add_argument("--fail-when-full", action="store_true",
                   help="an op the daemon would not admit yet fails (RESOURCE_EXHAUSTED) "
                        "instead of waiting for room")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per op")
    g.add_argument("--stream-calls", type=int,
                   help="gRPC calls each Stream spreads its ops over, 1..64 (default: the "
                        "library's, 4; 1 where many processes share a host's cores)")
    r = p.add_argument_group("run")
    r.add_argument("--ranks", type=int, help="simulated accelerators, one process each")
    r.add_argument("--gpu", nargs="?", const="all",
                   help="accelerators are GPUs (all, or a comma list of PCI addresses or "
                        "ordinals; rank i takes entry i mod n): data into GPU memory, compute "
                        "as a GPU kernel")
    r.add_argument("--prefix", default="workload", help="of the volumes the run makes")
    r.add_argument("--file", action="store_true",
                   help="file-backed volumes (in the daemon's writable --volume-dir)")
    r.add_argument("--media", help="media options of the volumes made (e.g. media=nvme-gen4)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--deadline", type=float, default=3600.0, help="seconds for the whole run")
    r.add_argument("--launcher", choices=hosts.LAUNCHERS, default="auto",
                   help="how ranks start: spawn (processes on this host), torchrun (this "
                        "process is one rank, of torchrun's or an Indexed Job's environment), "
                        "auto (torchrun when RANK or JOB_COMPLETION_INDEX, WORLD_SIZE, "
                        "MASTER_ADDR and MASTER_PORT are set)")
    r.add_argument("--keep", action="store_true", help="leave the run's volumes on the daemons")
    r.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    r.add_argument("--out", help="directory for result.json, table.txt and the PNG plots")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gdrctl workload", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="workload", required=True)
    t = sub.add_parser("train", help="MLPerf Storage training (unet3d, resnet50, cosmoflow)")
    t.add_argument("--model", default="unet3d")
    t.add_argument("--scale", type=float, default=1.0,
                   help="fraction of the closed dataset's files (small machines; named in "
                        "the result's deviations)")
    t.add_argument("--client-host-memory", type=float, metavar="GiB",
                   help="RAM of a client host, which the closed dataset is 5x (default: this "
                        "host's MemTotal)")
    t.add_argument("--steps", type=int, help="steps per rank an epoch (default: a whole epoch)")
    t.add_argument("--epochs", type=int, default=train.CLOSED_EPOCHS)
    t.add_argument("--runs", type=int, default=1,
                   help="the run repeated on the same dataset: mean +- stdev over the runs")
    t.add_argument("--batch", type=int)
    t.add_argument("--compute-time", type=float, help="seconds of compute per step")
    t.add_argument("--read-threads", type=int)
    t.add_argument("--prefetch-size", type=int, help="DLIO's reader.prefetch_size")
    t.add_argument("--computation-threads", type=int,
                   help="DLIO's reader.computation_threads (TFRecord models)")
    t.add_argument("--sample-bytes", type=size)
    t.add_argument("--sample-stdev", type=size)
    t.add_argument("--samples-per-file", type=int)
    t.add_argument("--repeat", type=size, metavar="SIZE",
                   help="each dataset volume holds SIZE bytes of memory seen again every SIZE "
                        "bytes, for a dataset past the daemons' memory (0: never; default: "
                        "only when a daemon cannot hold it; named in the deviations)")
    t.add_argument("--au-threshold", type=float)
    t.add_argument("--retries", type=int, default=2, help="of a failed sample read")
    t.add_argument("--find-max-accelerators", action="store_true",
                   help="search for the most accelerators whose mean AU passes: N doubles "
                        "from --ranks (default 1) until a run fails, then the gap is halved")
    t.add_argument("--max-accelerators", type=int,
                   help=f"the search's cap on N (default {search.DEFAULT_CAP})")
    _common(t)
    c = sub.add_parser("checkpoint", help="MLPerf Storage checkpointing (llama3-8b ... 1t)")
    c.add_argument("--model", default="llama3-8b")
    c.add_argument("--scale", type=float, default=1.0, help="fraction of every file's bytes")
    c.add_argument("--num-checkpoints-write", type=int, default=checkpoint.RULES_WRITES,
                   help="checkpoints written")
    c.add_argument("--num-checkpoints-read", type=int, default=checkpoint.RULES_READS,
                   help="of them read back, after the cache clear")
    c.add_argument("--interval", type=float, default=checkpoint.RULES_INTERVAL_S,
                   help="seconds of compute before each checkpoint (time_between_checkpoints)")
    c.add_argument("--chunk", type=size, default=64 << 20, help="bytes per op")
    c.add_argument("--qd", type=int, default=4, help="ops in flight per process")
    _common(c)
    k = sub.add_parser("kvcache", help="MLPerf Storage v3's KV-cache options (--option), or "
                                        "KV blocks with prefix reuse")
    o = k.add_argument_group("MLPerf Storage v3 (each flag given is a deviation, named)")
    o.add_argument("--option", help=f"one of {', '.join(kvcache_mlperf.OPTIONS)}")
    o.add_argument("--users", type=int, help="per client (default: the option's)")
    o.add_argument("--duration", type=float, help="seconds a trial (default 300)")
    o.add_argument("--trials", type=int, help="default 3")
    o.add_argument("--scale", type=float,
                   help="fraction of every request's context and of the CPU tier")
    o.add_argument("--cpu-bytes", type=size, help="the CPU tier per client")
    o.add_argument("--storage-bytes", type=size,
                   help="the storage tier per client (default 64 GiB x scale)")
    o.add_argument("--chunk", type=size, help="bytes an entry moves in per op (default 4MiB)")
    o.add_argument("--ring", type=int, help="chunks in flight per request (default 4)")
    x = k.add_argument_group("prefix reuse (without --option)")
    x.add_argument("--model", help="default llama3-8b")
    x.add_argument("--requests", type=int, help="per rank (default 200)")
    x.add_argument("--block-tokens", type=int, help="default 16")
    x.add_argument("--prefixes", type=int, help="default 32")
    x.add_argument("--zipf", type=float, help="default 1.0")
    x.add_argument("--prefix-tokens", type=int, help="default 1024")
    x.add_argument("--suffix-tokens", type=int, help="default 128")
    x.add_argument("--capacity", type=int, help="blocks each rank's volume holds (default 512)")
    _common(k)
    k.set_defaults(seed=None)  # --option's default is the option's seed (42)
    return p


def _target(a) -> Target:
    daemons = a.daemon or ([] if a.cluster else ["127.0.0.1:50051"])
    return Target(daemons=daemons, transport=a.transport, agent=a.agent, cluster=a.cluster,
                  local_socket=a.local_socket, require=a.require, token_file=a.token_file,
                  tls_ca=a.tls_ca, tls_cert=a.tls_cert, tls_key=a.tls_key,
                  tls_server_name=a.tls_server_name, crc32c=a.crc, timeout=a.timeout,
                  rdma_device=a.rdma_device, fail_when_full=a.fail_when_full,
                  stream_calls=a.stream_calls)


def execute(a) -> dict:
    gpus = tuple(gpu_list(a.gpu))
    common = dict(target=_target(a), gpus=gpus, prefix=a.prefix, file=a.file, media=a.media,
                  deadline_s=a.deadline, keep=a.keep)
    if a.workload == "train":
        m = train.model_with(a.model, batch=a.batch, compute_s=a.compute_time,
                             read_threads=a.read_threads, sample_bytes=a.sample_bytes,
                             sample_stdev=a.sample_stdev, samples_per_file=a.samples_per_file,
                             au_threshold=a.au_threshold, prefetch_size=a.prefetch_size,
                             computation_threads=a.computation_threads)
        memory = a.client_host_memory
        if memory is not None and not 0 < memory <= 1 << 30:
            raise InvalidArgument(f"--client-host-memory {memory:g} GiB is outside (0, 2^30]")
        return _train(a, train.TrainConfig(model=m, ranks=1 if a.ranks is None else a.ranks,
                                           scale=a.scale, steps=a.steps, epochs=a.epochs,
                                           seed=a.seed, retries=a.retries, runs=a.runs,
                                           client_hosts=hosts.client_hosts(),
                                           repeat=a.repeat,
                                           client_memory=None if memory is None else
                                           int(memory * (1 << 30)), **common))
    if a.workload == "checkpoint":
        return checkpoint.run(checkpoint.CheckpointConfig(
            model=checkpoint.model_named(a.model), ranks=a.ranks, scale=a.scale,
            writes=a.num_checkpoints_write, reads=a.num_checkpoints_read,
            interval_s=a.interval, chunk=a.chunk, qd=a.qd, **common))
    return _kvcache(a, common)


_KV_MLPERF = ("users", "duration", "trials", "scale", "cpu_bytes", "storage_bytes", "chunk",
              "ring")
_KV_PREFIX = ("model", "requests", "block_tokens", "prefixes", "zipf", "prefix_tokens",
              "suffix_tokens", "capacity")


def _kvcache(a, common: dict) -> dict:
    """An MLPerf option's run (--option), or the prefix-reuse workload; a flag of the other
    mode is refused, named."""
    flag = lambda f: "--" + f.replace("_", "-")  # noqa: E731
    ranks = 1 if a.ranks is None else a.ranks
    if a.option is not None:
        for f in _KV_PREFIX:
            if getattr(a, f) is not None:
                raise InvalidArgument(f"{flag(f)} is a flag of the prefix-reuse mode, not of "
                                      "--option")
        given = {k: getattr(a, f) for k, f in (("users", "users"), ("duration_s", "duration"),
                                               ("trials", "trials"), ("seed", "seed"),
                                               ("scale", "scale"), ("cpu_bytes", "cpu_bytes"),
                                               ("storage_bytes", "storage_bytes"),
                                               ("chunk", "chunk"), ("ring", "ring"))}
        return kvcache_mlperf.run(kvcache_mlperf.MlperfKvConfig(
            option=kvcache_mlperf.option_named(a.option), ranks=ranks,
            **{k: v for k, v in given.items() if v is not None}, **common))
    for f in _KV_MLPERF:
        if getattr(a, f) is not None:
            raise InvalidArgument(f"{flag(f)} needs --option (an MLPerf Storage v3 option)")
    given = {f: getattr(a, f) for f in _KV_PREFIX[1:]}
    return kvcache.run(kvcache.KvConfig(
        model=kvcache.model_named(a.model or "llama3-8b"), ranks=ranks,
        seed=1 if a.seed is None else a.seed,
        **{k: v for k, v in given.items() if v is not None}, **common))


def _train(a, cfg: train.TrainConfig) -> dict:
    """The train run, or with --find-max-accelerators the search over its ranks."""
    if a.find_max_accelerators:
        return search.run(cfg, a.max_accelerators)
    if a.max_accelerators is not None:
        raise InvalidArgument("--max-accelerators is the cap of --find-max-accelerators; "
                              "give both")
    return train.run(cfg)


def main(argv: Optional[List[str]] = None) -> int:
    a = parser().parse_args(argv)
    try:
        session = hosts.configure(a.launcher)
        if session is not None and getattr(a, "find_max_accelerators", False):
            if a.max_accelerators is None:  # a rank a process: N goes up to the processes
                a.max_accelerators = session.world
        elif session is not None and a.ranks is None:
            a.ranks = session.world  # a rank a process
        try:
            result = execute(a)
        except BaseException as e:
            Cleanup(e).run("leaving the ranks' group", hosts.end)
            raise
        hosts.end()  # before the interpreter ends (Session.close says why)
    except Error as e:
        _failed(a.workload, e)
        # A bad argument is refused before any rank runs; a rank's error, whatever its code,
        # is the run failing.
        return 2 if isinstance(e, InvalidArgument) and getattr(e, "rank", None) is None else 3
    except Exception as e:  # not the library's: a bug or the host's (OSError); still exit 3
        traceback.print_exc()
        _failed(a.workload, e)
        return 3
    if session is not None:
        result["hosts"] = session.describe()
        if session.rank != 0:  # rank 0 reports for every host
            return 1 if result.get("passed") is False else 0
    view = search if result["workload"] == search.WORKLOAD else report
    text = view.table(result)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        result["plots"] = view.plots(result, a.out)
        with open(os.path.join(a.out, "table.txt"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
    if a.json:
        json.dump(result, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text)
        for p in result.get("plots", []):
            print(f"  plot: {p}")
    return 1 if result.get("passed") is False else 0


def _failed(workload: str, e: BaseException) -> None:
    """The run's own error first, then what its clean-up ran into."""
    what = str(e) if isinstance(e, Error) else f"{type(e).__name__}: {e}"
    print(f"gdrctl workload {workload}: {what}", file=sys.stderr)
    for n in notes(e):
        print(f"  {n}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
