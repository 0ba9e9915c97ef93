"""Ranks on several hosts: a workload started on every client host by torchrun
(torch.distributed's env:// rendezvous), or one rank per pod of a Kubernetes Indexed Job. Each
process runs only its own rank's body; gloo carries what the ranks share (the barrier, every
rank's result, the first failed rank's error), so every host ends the run alike: with the
results in rank order, or with that rank's error (docs/workloads.md "Ranks on several hosts").

Every exchange is one round: each process sends one small message, and all receive all of
them in rank order (all_gather_object), so each process decides the same way from the same
messages and none waits on a rank that has already ended the run."""

import dataclasses
import datetime
import fcntl
import hashlib
import os
import pickle
import socket
import struct
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..errors import (Aborted, DeadlineExceeded, Error, FailedPrecondition, Internal,
                      InvalidArgument, Unavailable, from_status)
from .ranks import describe, rank_error

LAUNCHERS = ("auto", "spawn", "torchrun")
_MAX_WORLD = 1024       # as --ranks
_SIOCGIFADDR = 0x8915   # linux/sockios.h: an interface's IPv4 address
# A workload config's fields that are a process's own and may differ between ranks: where its
# host's stores are (an agent's socket, TLS files, the RDMA device), its GPUs, and the time left
# (a search hands each run what remains of its deadline, as each process counts it).
_OWN_FIELDS = ("target", "gpus", "deadline_s")

_decided = False
_session: Optional["Session"] = None


def configure(launcher: str = "auto",
              env: Optional[Mapping[str, str]] = None) -> Optional["Session"]:
    """How this process's ranks start: `spawn` (gdrctl's own processes, on this host),
    `torchrun` (this process is rank RANK, or JOB_COMPLETION_INDEX, of WORLD_SIZE, meeting the
    others at MASTER_ADDR:MASTER_PORT), or `auto` (torchrun when all of them are set). Returns
    the session, None for spawn; InvalidArgument names a variable missing or malformed."""
    global _decided, _session
    if launcher not in LAUNCHERS:
        raise InvalidArgument(f"--launcher {launcher!r} is not one of {', '.join(LAUNCHERS)}")
    env = os.environ if env is None else env
    _session = None if launcher == "spawn" else _from_env(env, launcher == "torchrun")
    _decided = True
    return _session


def session() -> Optional["Session"]:
    """This process's session (as `configure("auto")` finds it, unless configured), or None."""
    if not _decided:
        configure("auto")
    return _session


def end() -> None:
    """Ends this process's session, if one was opened (Session.close): the workload's main
    calls it once the run is over, whatever ended it, before the interpreter ends."""
    if _session is not None:
        _session.close()


def client_hosts() -> int:
    """The client hosts the ranks run on (what MLPerf's dataset rule sums the memory of): 1 for
    the spawner, torchrun's nodes (GROUP_WORLD_SIZE), else a host a process (an Indexed Job's
    pod counts as one)."""
    s = session()
    return 1 if s is None else s.nodes


def _from_env(env: Mapping[str, str], required: bool) -> Optional["Session"]:
    index = env.get("RANK") or env.get("JOB_COMPLETION_INDEX")
    given = {"RANK (or JOB_COMPLETION_INDEX)": index, "WORLD_SIZE": env.get("WORLD_SIZE"),
             "MASTER_ADDR": env.get("MASTER_ADDR"), "MASTER_PORT": env.get("MASTER_PORT")}
    missing = [k for k, v in given.items() if not v]
    if missing:
        if not required:
            return None
        raise InvalidArgument(f"--launcher torchrun: {', '.join(missing)} not set (torchrun sets "
                              "them all; in an Indexed Job's pod, Kubernetes sets "
                              "JOB_COMPLETION_INDEX and the pod spec the others)")
    world = _int(env["WORLD_SIZE"], "WORLD_SIZE", 1, _MAX_WORLD)
    rank = _int(index, "RANK" if env.get("RANK") else "JOB_COMPLETION_INDEX", 0, world - 1)
    port = _int(env["MASTER_PORT"], "MASTER_PORT", 1, 65535)
    addr = env["MASTER_ADDR"]
    if len(addr) > 253 or any(c.isspace() or c in "/@" for c in addr):
        raise InvalidArgument(f"MASTER_ADDR {addr!r} is not a host name or address")
    launcher = ("torchrun" if env.get("TORCHELASTIC_RUN_ID") else
                "indexed-job" if not env.get("RANK") else "env")
    nodes = (_int(env["GROUP_WORLD_SIZE"], "GROUP_WORLD_SIZE", 1, world)
             if env.get("GROUP_WORLD_SIZE") else world)
    return Session(rank, world, addr, port, launcher, nodes)


def _int(text: str, name: str, low: int, high: int) -> int:
    try:
        v = int(text, 10)
    except ValueError:
        raise InvalidArgument(f"{name} {text!r} is not an integer") from None
    if not low <= v <= high:
        raise InvalidArgument(f"{name} {v} is outside [{low}, {high}]")
    return v


def identity(master_addr: str, master_port: int) -> Dict[str, Optional[str]]:
    """This host as the other ranks see it: its name, the address it reaches MASTER_ADDR from,
    and the interface holding that address (None for what cannot be told: MASTER_ADDR not
    resolving yet, an IPv6 route)."""
    me: Dict[str, Optional[str]] = {"name": socket.gethostname(), "address": None,
                                    "interface": None}
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            # A UDP connect only picks the route: nothing is sent.
            s.connect((socket.gethostbyname(master_addr), master_port))
            me["address"] = s.getsockname()[0]
            for _, name in socket.if_nameindex():
                try:
                    got = fcntl.ioctl(s.fileno(), _SIOCGIFADDR,
                                      struct.pack("256s", name.encode()))
                except OSError:  # no IPv4 address on it
                    continue
                if socket.inet_ntoa(got[20:24]) == me["address"]:
                    me["interface"] = name
                    break
    except OSError:
        pass
    return me


def fingerprint(args: Any) -> Dict[str, str]:
    """What of a run's arguments must be the same on every rank, a digest a part: each item
    of a tuple, each field of a dataclass among them, less a process's own. (Pickled: a
    set would pickle in its hash order, which differs between processes; configs hold none.)"""
    parts: Dict[str, str] = {}
    for i, item in enumerate(args if isinstance(args, tuple) else (args,)):
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            named = [(f"{type(item).__name__}.{f.name}", getattr(item, f.name))
                     for f in dataclasses.fields(item) if f.name not in _OWN_FIELDS]
        else:
            named = [(f"argument {i}", item)]
        for name, value in named:
            parts[name] = hashlib.sha256(pickle.dumps(value, protocol=4)).hexdigest()
    return parts


class Session:
    """This process as rank `rank` of `world` processes on one or more hosts. Not thread-safe:
    every call is a collective over all the processes, made from one thread."""

    def __init__(self, rank: int, world: int, master_addr: str, master_port: int,
                 launcher: str, nodes: int):
        self.rank = rank
        self.world = world
        self.nodes = nodes  # the hosts the processes are on
        self.master_addr = master_addr
        self.master_port = master_port
        self.launcher = launcher
        self.host: Optional[Dict[str, Optional[str]]] = None
        self._dist: Any = None
        # What ended the session, as (rank or None, code, text): raised on every rank alike.
        self._ended: Optional[Tuple[Optional[int], int, str]] = None
        self._running: List[int] = []  # ranks last seen at a barrier, still in their bodies
        self._closed = False

    def describe(self) -> Dict[str, Any]:
        """What a result says of how its ranks were started."""
        return {"launcher": self.launcher, "processes": self.world, "hosts": self.nodes,
                "master": f"{self.master_addr}:{self.master_port}"}

    def run(self, body: Callable[..., Dict[str, Any]], ranks: int, args: Any,
            deadline_s: float) -> List[Dict[str, Any]]:
        """rank_runner.run for this process: runs `body` for this rank (processes past `ranks`
        run none), then every rank's result, in rank order, on every process (each with its
        `host`). The first failed rank's error, raised on every process alike (of its status
        class, with `rank` set); DeadlineExceeded past `deadline_s`, which is gloo's timeout too,
        so no wait outlasts it."""
        if not 0 < ranks <= self.world:
            raise InvalidArgument(f"the run has {ranks} ranks, but {self.launcher} started "
                                  f"{self.world} processes (WORLD_SIZE): one rank a process")
        self._open(deadline_s)
        end = time.monotonic() + deadline_s
        self._exchange("start", shared=fingerprint(args))  # after rank 0 made the volumes
        barrier = _Barrier(self, end, deadline_s)
        result: Any = None
        error: Optional[Tuple[int, str]] = None
        if self.rank < ranks:
            try:
                result = body(self.rank, ranks, args, barrier)
                if barrier.aborted:
                    raise Aborted("the rank aborted the barrier, then returned")
                if isinstance(result, dict):
                    result.setdefault("host", self.host)
            except BaseException as e:
                if self._ended is not None:  # e follows from the error that ended the session
                    raise self._error() from None
                error = describe(e)
        # Every process stays until all are done: the rounds answer the barriers of the ranks
        # still running.
        results: Dict[int, Any] = {}
        sent = False
        while True:
            if error is None and time.monotonic() > end:
                error = (DeadlineExceeded.code, f"DeadlineExceeded: the workload ran past its "
                         f"deadline of {deadline_s:g} s; ranks {self._running} were still "
                         "running")
            got = self._exchange("done", error, None if sent else result,
                                 not sent and self.rank < ranks)
            sent = True
            results.update((r, m["result"]) for r, m in enumerate(got) if m["has_result"])
            if all(m["kind"] == "done" for m in got):
                return [results[r] for r in range(ranks)]

    def settle(self, error: Optional[BaseException]) -> None:
        """The end of what every rank does together (the run's volumes taken away, by rank 0):
        one round in which each says whether it failed. Another rank's failure is raised here
        on a rank that had none of its own (the caller raises its own). Nothing is exchanged
        once the session has ended: every rank knows why."""
        if self._ended is not None:
            return
        self._open(None)
        try:
            self._exchange("exit", None if error is None else describe(error))
        except Error:
            if error is None:
                raise

    def close(self) -> None:
        """Leaves the ranks' gloo group (once; later calls do nothing), joining its threads.
        It must happen before the interpreter ends: a gloo worker may still hold the last
        exchange's tensors after the exchange returned, and when it lets them go it takes the
        GIL to free their Python objects. Left to the interpreter's exit, that could come while
        it finalizes, when Python ends the thread (pthread_exit) inside torch's noexcept code:
        std::terminate, SIGABRT instead of the run's exit status. Destroyed here, the group
        joins its workers with the GIL released, so they finish first."""
        self._closed = True
        dist, self._dist = self._dist, None
        if dist is not None and dist.is_initialized():
            dist.destroy_process_group()

    def _open(self, deadline_s: Optional[float]) -> None:
        """Joins the ranks' gloo group (once): a rendezvous at MASTER_ADDR:MASTER_PORT."""
        if self._dist is not None:
            return
        if self._closed:
            raise FailedPrecondition(f"rank {self.rank}: the ranks' session has ended "
                                     "(Session.close): it is not joined again")
        try:
            import torch.distributed as dist
        except ImportError as e:
            raise FailedPrecondition("ranks on several hosts need torch.distributed (Debian's "
                                     f"python3-torch): {e}") from None
        if not dist.is_available() or not dist.is_gloo_available():
            raise FailedPrecondition("ranks on several hosts need torch.distributed's gloo "
                                     "backend, which this torch lacks")
        self.host = identity(self.master_addr, self.master_port)
        if self.host["interface"] and not os.environ.get("GLOO_SOCKET_IFNAME"):
            # Else gloo offers the address the host name resolves to: often a loopback one
            # (127.0.1.1 on Debian) that no other host reaches.
            os.environ["GLOO_SOCKET_IFNAME"] = self.host["interface"]
        bound = {} if deadline_s is None else {"timeout": datetime.timedelta(seconds=deadline_s)}
        try:
            dist.init_process_group("gloo", init_method="env://", rank=self.rank,
                                    world_size=self.world, **bound)
        except Exception as e:  # torch's RuntimeError or ValueError, with gloo's words
            raise Unavailable(f"rank {self.rank}: the ranks' rendezvous at {self.master_addr}:"
                              f"{self.master_port} ({self.launcher}) failed: {e}") from None
        self._dist = dist

    def _exchange(self, kind: str, error: Optional[Tuple[int, str]] = None, result: Any = None,
                  has_result: bool = False,
                  shared: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
        """One round: this process's message to all, all of theirs back in rank order. `kind`
        is where it stands: `start` (a run's, with its arguments' fingerprint), `wait` (a
        barrier), `done` (its body over), `exit` (settle). A message with an error (the lowest
        rank's) ends the session, as do a lost peer, ranks out of step and ranks started with
        other arguments than rank 0's: the error is raised on every process alike."""
        if self._ended is not None:
            raise self._error()
        mine = {"kind": kind, "error": error, "result": result, "has_result": has_result,
                "shared": shared}
        got: List[Any] = [None] * self.world
        try:
            self._dist.all_gather_object(got, mine)
        except Exception as e:  # gloo's RuntimeError: a peer gone, or its timeout
            late = "imed out" in str(e)
            cls = DeadlineExceeded if late else Unavailable
            why = ("waited for the other ranks past the run's deadline (gloo's timeout)" if late
                   else "lost the other ranks (a rank's process ended, or its host cannot be "
                   "reached)")
            others = [r for r in self._running if r != self.rank]
            self._ended = (None, cls.code, f"{cls.__name__}: rank {self.rank} {why}; ranks "
                                           f"{others} were last seen running: {e}")
            raise self._error() from None
        failed = [(r, m["error"]) for r, m in enumerate(got) if m["error"] is not None]
        if failed:
            r, (code, text) = failed[0]
            self._ended = (r, code, text)
            raise self._error()
        kinds = {m["kind"] for m in got}
        if kinds not in ({"start"}, {"exit"}) and not kinds <= {"wait", "done"}:
            at = ", ".join(f"rank {r} at {m['kind']}" for r, m in enumerate(got))
            self._ended = (None, Internal.code, f"the ranks are out of step ({at}): were they "
                                                "all started with the same workload?")
            raise self._error()
        for r, m in enumerate(got):
            if m["shared"] != got[0]["shared"]:
                a, b = got[0]["shared"] or {}, m["shared"] or {}
                differ = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
                self._ended = (None, InvalidArgument.code, f"rank {r} was started with other "
                               f"arguments than rank 0: {', '.join(differ)} differ (every host "
                               "runs the same workload with the same arguments; only what is a "
                               "host's own may differ: --gpu and the target's options)")
                raise self._error()
        self._running = [r for r, m in enumerate(got) if m["kind"] == "wait"]
        return got

    def _error(self) -> Error:
        rank, code, text = self._ended
        return from_status(code, text) if rank is None else rank_error(rank, code, text)


class _Barrier:
    """What a rank's body waits at, as the spawner's multiprocessing Barrier: wait() returns
    once every rank still in its body has come to it (a rank whose body returned has left);
    it raises threading.BrokenBarrierError once a rank has failed (the run's error follows
    from Session.run), DeadlineExceeded past the run's deadline. A wait is bounded by gloo's
    timeout, the run's deadline, not by its own `timeout`."""

    def __init__(self, session: Session, end: float, deadline_s: float):
        self._session = session
        self._end = end
        self._deadline_s = deadline_s
        self.aborted = False

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.aborted:
            raise threading.BrokenBarrierError
        if time.monotonic() > self._end:
            raise DeadlineExceeded(f"the workload ran past its deadline of "
                                   f"{self._deadline_s:g} s at a barrier")
        try:
            self._session._exchange("wait")
        except Error as e:
            raise threading.BrokenBarrierError(str(e)) from None
        return self._session.rank

    def abort(self) -> None:
        """This rank waits no more; the others' waits break at its next round (its error)."""
        self.aborted = True
