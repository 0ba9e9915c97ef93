"""Client() with no arguments reaches what the environment names, as a pod's spec passes it:
GDRSTORE_ADDRESS, GDRSTORE_AGENT and GDRSTORE_TOKEN_FILE, read by libgdrclient where the C ABI
gets a NULL (so C and C++ callers get the same). An argument wins over its variable, the agent
over an address, and a malformed variable is named. Real daemons and a real gdragent."""

import os
import re
import signal
import subprocess
import tempfile
import time

import numpy as np
import pytest

import gdrstore
from conftest import Daemon

VARIABLES = ("GDRSTORE_ADDRESS", "GDRSTORE_AGENT", "GDRSTORE_TOKEN_FILE")
# A port nothing listens on: a client that dials it instead of the daemon fails.
NOWHERE = "127.0.0.1:1"


@pytest.fixture
def env(monkeypatch):
    """The environment with none of the variables; set them through the returned monkeypatch
    (os.environ reaches the library's getenv)."""
    for v in VARIABLES:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def own_daemon():
    # A volume name no other daemon has: bytes read from it prove which daemon answered.
    d = Daemon("--volume", "envvol=4MiB")
    yield d
    d.stop()


def read_and_verify(client, volume="envvol"):
    buf = client.allocate(1 << 16)
    moved = client.get(volume, 8192, into=buf)
    gdrstore.verify(np.frombuffer(buf, dtype=np.uint8), volume, 8192)
    return moved


def test_the_address_comes_from_GDRSTORE_ADDRESS(own_daemon, env):
    env.setenv("GDRSTORE_ADDRESS", own_daemon.address)
    with gdrstore.Client() as c:
        assert read_and_verify(c) == 1 << 16


def test_an_address_given_wins_over_GDRSTORE_ADDRESS(own_daemon, env):
    env.setenv("GDRSTORE_ADDRESS", NOWHERE)
    with gdrstore.Client(own_daemon.address) as c:
        read_and_verify(c)


@pytest.mark.parametrize("value", ["nonsense", "host:", "[::1]", "host:99999"])
def test_a_malformed_GDRSTORE_ADDRESS_is_named(env, value):
    env.setenv("GDRSTORE_ADDRESS", value)
    with pytest.raises(gdrstore.InvalidArgument,
                       match=f"^GDRSTORE_ADDRESS: .*'{re.escape(value)}'"):
        gdrstore.Client()


def test_an_address_given_skips_a_malformed_GDRSTORE_ADDRESS(own_daemon, env):
    env.setenv("GDRSTORE_ADDRESS", "nonsense")
    with gdrstore.Client(own_daemon.address) as c:
        read_and_verify(c)


def test_a_socket_path_too_long_for_GDRSTORE_AGENT_is_named(env):
    env.setenv("GDRSTORE_AGENT", "/run/" + "a" * 200)
    with pytest.raises(gdrstore.InvalidArgument,
                       match=r"^GDRSTORE_AGENT: socket path '/run/a+' is 205 bytes"):
        gdrstore.Client()


@pytest.fixture(scope="module")
def token_daemon():
    tmp = tempfile.mkdtemp(prefix="gdrstore-env-token-")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("env-test-token-0123456789abcdef name=envtest admin=yes\n")
    os.chmod(tokens, 0o600)
    d = Daemon("--volume", "envvol=4MiB", "--token-file", tokens)
    d.tokens = tokens
    yield d
    d.stop()


def test_the_token_comes_from_GDRSTORE_TOKEN_FILE(token_daemon, env):
    with gdrstore.Client(token_daemon.address) as c:  # without a token: refused
        with pytest.raises(gdrstore.Unauthenticated):
            read_and_verify(c)
    env.setenv("GDRSTORE_TOKEN_FILE", token_daemon.tokens)
    with gdrstore.Client(token_daemon.address) as c:
        read_and_verify(c)


def test_a_token_given_wins_over_GDRSTORE_TOKEN_FILE(token_daemon, env):
    env.setenv("GDRSTORE_TOKEN_FILE", "/nonexistent/tokens")  # would fail if it were read
    with gdrstore.Client(token_daemon.address,
                         token="env-test-token-0123456789abcdef") as c:
        read_and_verify(c)


def test_an_unreadable_GDRSTORE_TOKEN_FILE_is_named(own_daemon, env):
    env.setenv("GDRSTORE_TOKEN_FILE", "/nonexistent/tokens")
    with pytest.raises(gdrstore.NotFound,
                       match="^GDRSTORE_TOKEN_FILE: token file /nonexistent/tokens"):
        gdrstore.Client(own_daemon.address)


class Agent:
    """gdragent (beside GDRSTORED_BIN in the build tree) on a socket of its own, reaching
    `daemon`; ready once a client gets through it."""

    def __init__(self, daemon):
        binary = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
            os.environ.get("GDRSTORED_BIN", "build/daemon/gdrstored")))), "agent", "gdragent")
        if not os.path.exists(binary):
            pytest.skip(f"no gdragent at {binary} (build the gdragent target)")
        self.dir = tempfile.mkdtemp(prefix="gdrstore-env-agent-")
        self.socket = os.path.join(self.dir, "agent.sock")
        self.log = open(os.path.join(self.dir, "gdragent.log"), "wb")
        self.proc = subprocess.Popen([binary, "--socket", self.socket, "--daemon", daemon.address,
                                      "--log-level", "warning"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                gdrstore.Client(agent=self.socket).close()
                return
            except gdrstore.Error:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"gdragent did not start: see {self.log.name}")
                time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="module")
def agent(own_daemon):
    a = Agent(own_daemon)
    yield a
    a.stop()


def test_the_agent_comes_from_GDRSTORE_AGENT_and_wins_over_the_address(agent, env):
    env.setenv("GDRSTORE_AGENT", agent.socket)
    env.setenv("GDRSTORE_ADDRESS", NOWHERE)  # the agent reaches the daemon, not this client
    with gdrstore.Client() as c:
        assert read_and_verify(c).path.startswith("agent/")


def test_agent_given_as_empty_goes_to_the_daemon_directly(own_daemon, agent, env):
    env.setenv("GDRSTORE_AGENT", agent.socket)
    env.setenv("GDRSTORE_ADDRESS", own_daemon.address)
    with gdrstore.Client(agent="") as c:
        assert not read_and_verify(c).path.startswith("agent/")


def test_gdrctl_reads_GDRSTORE_ADDRESS_as_the_library_does(own_daemon, env):
    gdrctl = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
        os.environ.get("GDRSTORED_BIN", "build/daemon/gdrstored")))), "client", "gdrctl")
    if not os.path.exists(gdrctl):
        pytest.skip(f"no gdrctl at {gdrctl}")
    env.setenv("GDRSTORE_ADDRESS", own_daemon.address)
    p = subprocess.run([gdrctl, "read", "--volume", "envvol", "-s", "4KiB", "--verify"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    env.setenv("GDRSTORE_ADDRESS", "nonsense")
    p = subprocess.run([gdrctl, "info"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("gdrctl: GDRSTORE_ADDRESS: "), p.stderr
