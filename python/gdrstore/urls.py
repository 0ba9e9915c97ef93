"""gdrstore.connect(url, **options): one way to open any store, by a URL that says which.

    HOST:PORT                         a daemon (Client(address=...))
    agent:PATH                        the node agent's socket (Client(agent=PATH))
    etcd://HOST:PORT[,HOST:PORT]/PREFIX   a cluster kept in etcd (Cluster(etcd=URL))
    file:MEMBERS                      a cluster from a members file (Cluster(members_file=...))

The URL is checked here for what can be told without connecting (so that a typo is named
before anything is dialled); the rest (an etcd URL's parts, a members file's content, the
environment's GDRSTORE_* variables when no URL is given) is the library's, as Client and
Cluster check it."""

import inspect
import os
import re
from typing import Optional, Tuple, Union

from .client import Client
from .cluster import Cluster
from .errors import InvalidArgument

SCHEMES = "HOST:PORT, agent:PATH, etcd://HOST:PORT[,HOST:PORT]/PREFIX or file:MEMBERS"

# HOST:PORT with a name, an IPv4 address or a bracketed IPv6 address as HOST.
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")
_UNIX_PATH_MAX = 107  # sockaddr_un's sun_path, less its NUL
# The keywords a URL stands for.
_WHERE = ("address", "agent", "etcd", "members_file")


def check_address(address, what: str = "address") -> str:
    """`address` if it is HOST:PORT with a port in [1, 65535]; InvalidArgument naming `what`
    and the text otherwise."""
    m = _HOST_PORT.match(address) if isinstance(address, str) else None
    if m is None:
        raise InvalidArgument(f"{what} {address!r} is not HOST:PORT")
    if not 0 < int(m.group(2)) < 65536:
        raise InvalidArgument(f"{what} {address!r}: port {int(m.group(2))} is outside "
                              "[1, 65535]")
    return address


def parse(url) -> Tuple[type, str, str]:
    """(Client or Cluster, the keyword that takes the rest, its value) for `url`;
    InvalidArgument naming what is wrong with it."""
    if not isinstance(url, str):
        raise InvalidArgument(f"store URL must be a str, not {type(url).__name__}")
    if url != url.strip() or not url:
        raise InvalidArgument(f"store URL {url!r} is empty or padded with spaces: give {SCHEMES}")
    if "\0" in url:
        raise InvalidArgument(f"store URL {url!r} contains a NUL byte")
    if url.startswith("agent:"):
        path = url[len("agent:"):]
        if not path:
            raise InvalidArgument(f"store URL {url!r} names no socket: agent:PATH")
        if len(os.fsencode(path)) > _UNIX_PATH_MAX:
            raise InvalidArgument(f"store URL {url!r}: a Unix socket's path is at most "
                                  f"{_UNIX_PATH_MAX} bytes")
        return Client, "agent", path
    if url.startswith("file:"):
        path = url[len("file:"):]
        if not path:
            raise InvalidArgument(f"store URL {url!r} names no members file: file:MEMBERS")
        return Cluster, "members_file", path
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if scheme is not None:
        if scheme.group(1) != "etcd":
            raise InvalidArgument(f"store URL {url!r}: unknown scheme {scheme.group(1)!r} "
                                  f"(give {SCHEMES})")
        rest = url[len("etcd://"):]
        hosts, slash, prefix = rest.partition("/")
        if not slash or not prefix:
            raise InvalidArgument(f"store URL {url!r} names no prefix: "
                                  "etcd://HOST:PORT[,HOST:PORT]/PREFIX")
        for endpoint in hosts.split(","):
            check_address(endpoint, f"store URL {url!r}: etcd endpoint")
        return Cluster, "etcd", url
    if _HOST_PORT.match(url) is None:
        raise InvalidArgument(f"store URL {url!r} is none of {SCHEMES}")
    return Client, "address", check_address(url, "store URL")


def connect(url: Optional[str] = None, **options) -> Union[Client, Cluster]:
    """Opens the store `url` names (see the module's doc): a Client or a Cluster, whose calls
    are the same. `options` are the class's keyword arguments (transport, token_file, timeout,
    tls_ca, crc32c, ...); one the kind does not take (agent= for a cluster, member_retry= for
    a daemon) raises gdrstore.InvalidArgument naming it, as does one the URL stands for
    (address=, agent=, etcd=, members_file=). A HOST:PORT URL reaches that daemon directly,
    whatever GDRSTORE_AGENT says. url None: a Client as the environment says (GDRSTORE_AGENT,
    else GDRSTORE_ADDRESS, else 127.0.0.1:50051)."""
    if url is None:
        kind, key, value = Client, None, None
    else:
        kind, key, value = parse(url)
    taken = inspect.signature(kind.__init__).parameters
    for name in options:
        if name not in taken or name == "self":
            raise InvalidArgument(f"connect option {name}= is not one a {kind.__name__} takes")
        if key is not None and name in _WHERE:
            raise InvalidArgument(f"connect option {name}= names where to go, which the URL "
                                  f"{url!r} does")
    if key is not None:
        options[key] = value
    if key == "address":
        options["agent"] = ""  # the daemon the URL names, whatever GDRSTORE_AGENT says
    return kind(**options)
