"""Where a workload's bytes go: one daemon, several, or the node agent in front of them. A
Target is plain data (it crosses into every rank's process); each rank opens its own clients
from it. Volumes are laid out over the daemons in turn, and made and taken away through the
daemons' Admin service (the agent moves bytes but makes no volumes, so a run through the agent
names the daemons too)."""

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..client import Client
from ..errors import AlreadyExists, InvalidArgument, NotFound

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

    def check(self) -> None:
        """InvalidArgument naming what is wrong with the target as given."""
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

    def path(self) -> "DataPath":
        """This process's way to the volumes: a client per daemon, or one through the agent."""
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
        for c in self.clients:
            c.close()


class Volumes:
    """The volumes a workload made: made on daemon i mod D in turn, taken away at the end
    (unless kept). A volume of the same name already there is an error naming it (a run's
    volumes are its own)."""

    def __init__(self, target: Target, file: bool, media: Optional[str]):
        self._admins = target.admin_clients()
        self._names = target.daemons
        self._file = file
        self._media = media
        self.made: Dict[str, int] = {}  # name -> daemon index

    def make(self, index: int, name: str, size: int) -> None:
        d = index % len(self._admins)
        try:
            self._admins[d].create_volume(name, size, file=self._file, media=self._media)
        except AlreadyExists as e:
            raise AlreadyExists(f"{e} on {self._names[d]}: left by an earlier run? `gdrctl "
                                f"--daemon {self._names[d]} volume delete {name}`, or give "
                                "another --prefix") from None
        self.made[name] = d

    def reopen(self) -> None:
        """Takes every file volume away and serves it again from its file: the daemon syncs a
        file volume's pages and drops them from the page cache when it lets the volume go, so
        what is read next comes from the file (what stands for MLPerf's cache clear). Memory
        volumes have no cache to clear: nothing is done."""
        if not self._file:
            return
        for name, d in self.made.items():
            size = self._size(d, name)
            self._admins[d].delete_volume(name)
            self._admins[d].create_volume(name, size, file=True, media=self._media)

    def _size(self, d: int, name: str) -> int:
        for v in self._admins[d].info().get("volumes", []):
            if v.get("name") == name:
                return int(v.get("size", 0))
        raise NotFound(f"volume {name!r} is gone from daemon {d}")

    def remove(self) -> None:
        """Takes away every volume made (their files too); errors after the first are kept
        from hiding it."""
        first = None
        for name, d in list(self.made.items()):
            try:
                self._admins[d].delete_volume(name, delete_file=self._file)
                del self.made[name]
            except Exception as e:  # report the first, still try the rest
                first = first or e
        if first is not None:
            raise first

    def close(self) -> None:
        for c in self._admins:
            c.close()
