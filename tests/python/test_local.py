"""The local transport and library-allocated memory from Python, against a real gdrstored with
a handoff socket: Client.allocate's memory is handed over without a copy and filled in place;
an array of the caller's own is refused naming allocate; a bad socket path is named."""

import os

import numpy as np
import pytest

import gdrstore
from conftest import Daemon

MiB = 1 << 20


@pytest.fixture(scope="module")
def daemon_with_socket():
    import tempfile
    sock = os.path.join(tempfile.mkdtemp(prefix="gdrstore-py-sock-"), "local.sock")
    d = Daemon("--volume", "vol0=16MiB", "--volume", "rw=16MiB", "--local-socket", sock)
    d.socket = sock
    yield d
    d.stop()


def test_allocated_memory_moves_verified_bytes_over_local(daemon_with_socket):
    with gdrstore.Client(daemon_with_socket.address, transport="local") as c:
        assert c.info()["local"]["socket_path"] == daemon_with_socket.socket
        view = c.allocate(4 * MiB)
        a = np.frombuffer(view, dtype=np.uint8)
        assert c.get("vol0", 4097, a) == 4 * MiB
        gdrstore.verify(a, "vol0", 4097)
        a[:] = 7
        c.put(a, "rw", 0)
        b = np.frombuffer(c.allocate(4 * MiB), dtype=np.uint8)
        c.get("rw", 0, b)
        assert (b == 7).all()


def test_memory_the_caller_owns_is_refused_naming_allocate(daemon_with_socket):
    with gdrstore.Client(daemon_with_socket.address, transport="local") as c:
        mine = np.zeros(MiB, dtype=np.uint8)
        with pytest.raises(gdrstore.FailedPrecondition, match="allocate"):
            c.get("vol0", 0, mine)


def test_a_socket_nobody_serves_is_named(daemon_with_socket):
    with pytest.raises(gdrstore.Unavailable, match="nobody-here.sock"):
        gdrstore.Client(daemon_with_socket.address, transport="local",
                        local_socket="/nonexistent/nobody-here.sock")


def test_allocate_checks_its_size(daemon_with_socket):
    with gdrstore.Client(daemon_with_socket.address, transport="local") as c:
        with pytest.raises(TypeError):
            c.allocate(1.5)
        with pytest.raises(gdrstore.ArgumentOutOfRange):
            c.allocate(0)


def test_every_result_names_its_path_and_require_refuses_a_fallback(daemon_with_socket):
    with gdrstore.Client(daemon_with_socket.address, transport="local") as c:
        a = np.frombuffer(c.allocate(MiB), dtype=np.uint8)
        moved = c.get("vol0", 0, a)
        assert moved == MiB and isinstance(moved, gdrstore.Moved)
        assert moved.path == "local/host"
        with c.stream() as s:
            assert s.put(a, "rw", 0).result().path == "local/host"
    with gdrstore.Client(daemon_with_socket.address, transport="tcp") as c:
        assert c.get("vol0", 0, np.zeros(4096, dtype=np.uint8)).path == "tcp/host"
    # The caller asked for local and got tcp: refused, naming both.
    with pytest.raises(gdrstore.FailedPrecondition, match="require=local.*tcp"):
        gdrstore.Client(daemon_with_socket.address, transport="tcp", require="local")
    with pytest.raises(gdrstore.InvalidArgument, match="nvlink"):
        gdrstore.Client(daemon_with_socket.address, transport="auto", require="nvlink")
    with gdrstore.Client(daemon_with_socket.address, transport="auto", require="local") as c:
        assert c.get("vol0", 0, np.frombuffer(c.allocate(4096), dtype=np.uint8)).path == \
            "local/host"
