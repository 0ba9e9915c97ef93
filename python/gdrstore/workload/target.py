"""Where a workload's bytes go: one daemon, several, the node agent in front of them, or a
cluster through etcd. A Target is plain data (it crosses into every rank's process); each rank
opens its own clients from it. Volumes are laid out over the daemons in turn, and made and taken
away through the daemons' Admin service (the agent moves bytes but makes no volumes, so a run
through the agent names the daemons too). A cluster's volumes are striped over its members,
made on them through the library (ClusterClient::CreateVolume with MemberVolumes)."""

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..client import Client
from ..cluster import Cluster
from ..errors import AlreadyExists, InvalidArgument, Unavailable
from .cleanup import Cleanup

CLUSTER_STRIPE_UNIT = 4 << 20
_CLUSTER_OPS_IN_FLIGHT = 8  # per stream: cluster ops are unary calls, run on this many threads

_DAEMON = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")


@dataclass(frozen=True)
class Target:
    daemons: List[str] = field(default_factory=list)  # HOST:PORT of each daemon
    transport: str = "tcp"
    agent: Optional[str] = None         # the agent's socket: every op goes through it
    local_socket: Optional[str] = None
    require: Optional[str] = None
    token_file: Optional[str] = None
    tls_ca: Optional[str] = None
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    tls_server_name: Optional[str] = None
    crc32c: bool = False
    timeout: float = 120.0              # seconds per op
    cluster: Optional[str] = None       # etcd://HOST:PORT/PREFIX: a cluster instead of daemons

    def check(self) -> None:
        """InvalidArgument naming what is wrong with the target as given."""
        if self.cluster is not None:
            if self.daemons or self.agent:
                raise InvalidArgument("--cluster goes alone: not with --daemon or --agent")
            if not isinstance(self.cluster, str) or not self.cluster.startswith("etcd://"):
                raise InvalidArgument(f"--cluster {self.cluster!r} is not etcd://HOST:PORT/PREFIX")
            return
        if not self.daemons:
            raise InvalidArgument("no daemon: give --daemon HOST:PORT (with --agent too: the "
                                  "workload makes its volumes through the daemons' Admin)")
        for d in self.daemons:
            m = _DAEMON.match(d) if isinstance(d, str) else None
            if m is None or not 0 < int(m.group(2)) < 65536:
                raise InvalidArgument(f"--daemon {d!r} is not HOST:PORT")
        if len(set(self.daemons)) != len(self.daemons):
            raise InvalidArgument("a --daemon is given twice")
        if self.transport not in ("tcp", "rc", "dc", "local", "auto"):
            raise InvalidArgument(f"--transport {self.transport!r} is not tcp, rc, dc, local or "
                                  "auto")
        if not 0 < self.timeout <= 86400:
            raise InvalidArgument(f"--timeout {self.timeout} s is outside (0, 86400]")

    def _open(self, address: Optional[str]) -> Client:
        return Client(address or self.daemons[0], transport=self.transport,
                      token_file=self.token_file, timeout=self.timeout, tls_ca=self.tls_ca,
                      tls_cert=self.tls_cert, tls_key=self.tls_key,
                      tls_server_name=self.tls_server_name, crc32c=self.crc32c,
                      agent=self.agent if address is None else None,
                      local_socket=self.local_socket, require=self.require)

    def admin_clients(self) -> List[Client]:
        """One direct client per daemon, for making and taking away volumes (never through
        the agent)."""
        return [Client(d, transport="tcp", token_file=self.token_file, timeout=self.timeout,
                       tls_ca=self.tls_ca, tls_cert=self.tls_cert, tls_key=self.tls_key,
                       tls_server_name=self.tls_server_name) for d in self.daemons]

    def open_cluster(self) -> Cluster:
        return Cluster(etcd=self.cluster, transport=self.transport, token_file=self.token_file,
                       timeout=self.timeout, tls_ca=self.tls_ca, tls_cert=self.tls_cert,
                       tls_key=self.tls_key, tls_server_name=self.tls_server_name,
                       crc32c=self.crc32c)

    @property
    def places(self) -> int:
        """How many places volumes are dealt over: the daemons, or one cluster."""
        return 1 if self.cluster else len(self.daemons)

    def path(self) -> "DataPath":
        """This process's way to the volumes: a client per daemon, one through the agent, or
        the cluster."""
        if self.cluster:
            return DataPath([ClusterPath(self.open_cluster())], None)
        if self.agent:
            return DataPath([self._open(None)], None)
        return DataPath([self._open(d) for d in self.daemons], len(self.daemons))


class DataPath:
    """The clients one rank moves bytes with, and which one serves a volume: volume i of a
    layout lies on daemon i mod D (through the agent there is one client, and the agent finds
    the daemon)."""

    def __init__(self, clients: List[Client], spread: Optional[int]):
        self.clients = clients
        self._spread = spread

    def client(self, index: int) -> Client:
        """The client for the volume laid out `index`-th."""
        return self.clients[index % len(self.clients)] if self._spread else self.clients[0]

    def close(self) -> None:
        """Closes every client; the first close's error is raised, the rest noted on it."""
        c = Cleanup()
        for i, client in enumerate(self.clients):
            c.run(f"closing client {i}", client.close)
        c.raise_first()


class ClusterPath:
    """A Cluster with the calls the workloads make of a Client: get/put with `at`, a stream (the
    cluster's calls are unary; a stream runs them on a few threads), host memory, info."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def get(self, volume, offset, into, length=None, at=0):
        return self.cluster.get(volume, offset, into, length, at=at)

    def put(self, src, volume, offset, length=None, at=0):
        return self.cluster.put(volume, offset, src, length, at=at)

    def register(self, obj) -> None:
        self.cluster.register(obj)

    def allocate(self, nbytes: int) -> memoryview:
        return memoryview(bytearray(nbytes))

    def info(self) -> Dict[str, Any]:
        return {}  # no single op limit: a cluster op is cut into stripe units

    def stream(self) -> "_ClusterStream":
        return _ClusterStream(self)

    def close(self) -> None:
        self.cluster.close()


class _ClusterOp:
    def __init__(self, future):
        self._f = future
        self._t = time.monotonic()
        self.latency: Optional[float] = None
        future.add_done_callback(self._done)

    def _done(self, _):
        self.latency = time.monotonic() - self._t

    def result(self, timeout=None):
        return self._f.result(timeout)


class _ClusterStream:
    def __init__(self, path: ClusterPath):
        self._path = path
        self._pool = ThreadPoolExecutor(_CLUSTER_OPS_IN_FLIGHT)
        self._ops: List[_ClusterOp] = []
        self._lock = threading.Lock()

    def _submit(self, fn, *args, **kw) -> _ClusterOp:
        op = _ClusterOp(self._pool.submit(fn, *args, **kw))
        with self._lock:
            self._ops.append(op)
        return op

    def get(self, volume, offset, into, length=None, at=0):
        return self._submit(self._path.get, volume, offset, into, length, at=at)

    def put(self, src, volume, offset, length=None, at=0):
        return self._submit(self._path.put, src, volume, offset, length, at=at)

    def wait_all(self, timeout=None):
        with self._lock:
            ops, self._ops = self._ops, []
        for op in ops:
            try:
                op.result(timeout)
            except Exception:
                pass  # each op's own result() raises it
        return ops

    def close(self) -> None:
        self.wait_all()
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Volumes:
    """The volumes a workload made: made on daemon i mod D in turn, taken away at the end
    (unless kept). A volume of the same name already there is an error naming it (a run's
    volumes are its own)."""

    def __init__(self, target: Target, file: bool, media: Optional[str], keep: bool = False):
        self._keep = keep
        self._cluster = target.open_cluster() if target.cluster else None
        self._admins = [] if self._cluster else target.admin_clients()
        self._names = target.daemons
        self._agent = bool(target.agent)
        self._file = file
        self._media = media
        self.made: Dict[str, int] = {}  # name -> daemon index
        self._sizes: Dict[str, int] = {}  # name -> the size it was made with

    def make(self, index: int, name: str, size: int) -> None:
        if self._cluster is not None:
            self._cluster.create_volume(name, CLUSTER_STRIPE_UNIT, size=size, file=self._file,
                                        media=self._media)
            self.made[name] = 0
            self._sizes[name] = size
            return
        d = index % len(self._admins)
        try:
            self._admins[d].create_volume(name, size, file=self._file, media=self._media)
        except AlreadyExists as e:
            raise AlreadyExists(f"{e} on {self._names[d]}: left by an earlier run? `gdrctl "
                                f"--daemon {self._names[d]} volume delete {name}`, or give "
                                "another --prefix") from None
        except Unavailable as e:
            # Through the agent the daemon is easy to forget: say why one is dialled.
            why = (" (the agent makes no volumes: --daemon names the daemon behind it)"
                   if self._agent else "")
            raise Unavailable(f"the run's volumes are made on daemon {self._names[d]}{why}: "
                              f"{e}") from None
        self.made[name] = d
        self._sizes[name] = size

    def reopen(self) -> None:
        """Takes every file volume away and serves it again from its file: the daemon syncs a
        file volume's pages and drops them from the page cache when it lets the volume go, so
        what is read next comes from the file (what stands for MLPerf's cache clear). Memory
        volumes have no cache to clear: nothing is done."""
        if not self._file:
            return
        if self._cluster is not None:
            raise InvalidArgument("the cache clear of file volumes is offered on daemons, not "
                                  "on a cluster's members yet")
        for name, d in self.made.items():
            self._admins[d].delete_volume(name)
            self._admins[d].create_volume(name, self._sizes[name], file=True, media=self._media)

    def remove(self, after: Optional[BaseException] = None) -> None:
        """Takes away every volume made (their files too), each tried whatever the others
        did. With `after` (the error that ended the run) the failures are noted on it;
        without, the first is raised with the rest noted on it."""
        c = Cleanup(after)
        for name, d in list(self.made.items()):
            c.run(f"taking volume {name} away", lambda name=name, d=d: self._delete(name, d))
        c.raise_first()

    def _delete(self, name: str, d: int) -> None:
        if self._cluster is not None:
            self._cluster.delete_volume(name, member_volumes=True, delete_files=self._file)
        else:
            self._admins[d].delete_volume(name, delete_file=self._file)
        del self.made[name]

    def __enter__(self) -> "Volumes":
        return self

    def __exit__(self, _type, error, _tb) -> bool:
        """Takes the volumes away (unless kept), then closes, whatever ended the run. When
        the run failed, its error is what propagates: a clean-up failure (the daemon gone:
        `Connection refused`) is noted on it, never raised in its place."""
        c = Cleanup(error)
        if not self._keep:
            c.run("taking the run's volumes away", lambda: self.remove(c.primary))
        c.run("closing the admin clients", self.close)
        c.raise_first()
        return False

    def close(self) -> None:
        """Closes every admin client (and the cluster); the first error is raised, the
        rest noted on it."""
        c = Cleanup()
        for d, client in enumerate(self._admins):
            c.run(f"closing the admin client of {self._names[d]}", client.close)
        if self._cluster is not None:
            c.run("closing the cluster", self._cluster.close)
        c.raise_first()
