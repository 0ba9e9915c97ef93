"""Where a workload's bytes go: one daemon, several, the node agent in front of them, or a
cluster through etcd. A Target is plain data (it crosses into every rank's process); each rank
opens its own stores from it, each through gdrstore.connect (a Client or a Cluster: the same
calls). Volumes are laid out over the daemons in turn, and made and taken
away through the daemons' Admin service (the agent moves bytes but makes no volumes, so a run
through the agent names the daemons too). A cluster's volumes are striped over its members,
made on them through the library (ClusterClient::CreateVolume with MemberVolumes)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..errors import AlreadyExists, InvalidArgument, Unavailable
from ..store import Store
from ..urls import check_address, connect, parse
from . import hosts
from .cleanup import Cleanup

CLUSTER_STRIPE_UNIT = 4 << 20


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
    rdma_device: Optional[str] = None   # rc/dc: the RDMA device
    fail_when_full: bool = False        # an op the daemon would not admit yet fails at once
    stream_calls: Optional[int] = None  # gRPC calls each Stream spreads its ops over (1..64)
    cluster: Optional[str] = None       # etcd://HOST:PORT/PREFIX: a cluster instead of daemons

    def check(self) -> None:
        """InvalidArgument naming what is wrong with the target as given."""
        if self.cluster is not None:
            if self.daemons or self.agent or self.local_socket:
                raise InvalidArgument("--cluster goes alone: not with --daemon, --agent or "
                                      "--local-socket")
            if not isinstance(self.cluster, str) or not self.cluster.startswith("etcd://"):
                raise InvalidArgument(f"--cluster {self.cluster!r} is not etcd://HOST:PORT/PREFIX")
            try:
                parse(self.cluster)
            except InvalidArgument as e:
                raise InvalidArgument(f"--cluster: {e}") from None
            return
        if not self.daemons:
            raise InvalidArgument("no daemon: give --daemon HOST:PORT (with --agent too: the "
                                  "workload makes its volumes through the daemons' Admin)")
        for d in self.daemons:
            check_address(d, "--daemon")
        if len(set(self.daemons)) != len(self.daemons):
            raise InvalidArgument("a --daemon is given twice")
        if self.transport not in ("tcp", "rc", "dc", "local", "auto"):
            raise InvalidArgument(f"--transport {self.transport!r} is not tcp, rc, dc, local or "
                                  "auto")
        if not 0 < self.timeout <= 86400:
            raise InvalidArgument(f"--timeout {self.timeout} s is outside (0, 86400]")
        if self.stream_calls is not None and not 1 <= self.stream_calls <= 64:
            raise InvalidArgument(f"--stream-calls {self.stream_calls} is outside 1..64")

    def options(self) -> Dict[str, Any]:
        """The keyword arguments every store of the target is opened with (those left at
        their default are left out: a cluster takes no local_socket)."""
        given = dict(transport=self.transport, token_file=self.token_file, timeout=self.timeout,
                     tls_ca=self.tls_ca, tls_cert=self.tls_cert, tls_key=self.tls_key,
                     tls_server_name=self.tls_server_name, crc32c=self.crc32c or None,
                     local_socket=self.local_socket, require=self.require,
                     rdma_device=self.rdma_device, fail_when_full=self.fail_when_full or None,
                     stream_calls=self.stream_calls)
        return {k: v for k, v in given.items() if v is not None}

    def open(self, url: Optional[str] = None) -> Store:
        """The store `url` names (default: the cluster, else the agent, else the first
        daemon), opened through gdrstore.connect with the target's options."""
        if url is None:
            url = self.cluster or (f"agent:{self.agent}" if self.agent else self.daemons[0])
        return connect(url, **self.options())

    def admin_clients(self) -> List[Store]:
        """One direct client per daemon, for making and taking away volumes (never through
        the agent)."""
        return [connect(d, transport="tcp", token_file=self.token_file, timeout=self.timeout,
                        tls_ca=self.tls_ca, tls_cert=self.tls_cert, tls_key=self.tls_key,
                        tls_server_name=self.tls_server_name) for d in self.daemons]

    @property
    def places(self) -> int:
        """How many places volumes are dealt over: the daemons, or one cluster."""
        return 1 if self.cluster else len(self.daemons)

    def path(self) -> "DataPath":
        """This process's way to the volumes: a client per daemon, or one store (the agent's
        client, or the cluster) that finds the daemons itself."""
        if self.cluster or self.agent:
            return DataPath([self.open()], None)
        return DataPath([self.open(d) for d in self.daemons], len(self.daemons))


class DataPath:
    """The stores one rank moves bytes with, and which one serves a volume: volume i of a
    layout lies on daemon i mod D (through the agent or a cluster there is one store, which
    finds the daemons)."""

    def __init__(self, clients: List[Store], spread: Optional[int]):
        self.clients = clients
        self._spread = spread

    def client(self, index: int) -> Store:
        """The store for the volume laid out `index`-th."""
        return self.clients[index % len(self.clients)] if self._spread else self.clients[0]

    def close(self) -> None:
        """Closes every store; the first close's error is raised, the rest noted on it."""
        c = Cleanup()
        for i, client in enumerate(self.clients):
            c.run(f"closing client {i}", client.close)
        c.raise_first()


class Volumes:
    """The volumes a workload made: made on daemon i mod D in turn, taken away at the end
    (unless kept). A volume of the same name already there is an error naming it (a run's
    volumes are its own). With ranks on several hosts (hosts.py) rank 0 alone makes them and
    takes them away; the other ranks wait for them at each run's start, and at the end every
    rank learns whether any failed (hosts.Session.settle)."""

    def __init__(self, target: Target, file: bool, media: Optional[str], keep: bool = False):
        self._keep = keep
        self._session = hosts.session()
        self._maker = self._session is None or self._session.rank == 0
        try:
            self._cluster = target.open() if target.cluster and self._maker else None
            self._admins = [] if target.cluster or not self._maker else target.admin_clients()
        except BaseException as e:
            if self._session is not None:
                self._session.settle(e)  # the other ranks wait for the volumes: they learn why
            raise
        self._names = target.daemons
        self._agent = bool(target.agent)
        self._file = file
        self._media = media
        self.made: Dict[str, int] = {}  # name -> daemon index
        self._sizes: Dict[str, int] = {}  # name -> the size it was made with

    def make(self, index: int, name: str, size: int, repeat: Optional[int] = None) -> None:
        """Makes volume `name` of `size` bytes on daemon `index` mod D (or the cluster).
        `repeat`: a memory volume holding only that many bytes, seen again every `repeat` bytes
        (Client.create_volume's), for a dataset larger than the daemons' memory."""
        if not self._maker:  # rank 0 makes it
            return
        if repeat is not None and (self._file or self._cluster is not None):
            raise InvalidArgument("a repeating dataset is made of memory volumes on daemons: "
                                  "not with file volumes, nor on a cluster")
        if self._cluster is not None:
            self._cluster.create_volume(name, size, file=self._file, media=self._media,
                                        stripe_unit=CLUSTER_STRIPE_UNIT)
            self.made[name] = 0
            self._sizes[name] = size
            return
        d = index % len(self._admins)
        try:
            self._admins[d].create_volume(name, size, file=self._file, media=self._media,
                                          repeat=repeat)
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
        volumes have no cache to clear: nothing is done. Rank 0 does it for every host."""
        if not self._file or not self._maker:
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
            self._cluster.delete_volume(name, self._file, member_volumes=True)
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
        if self._session is not None:
            c.run("ending the run on every host", lambda: self._session.settle(c.primary))
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
