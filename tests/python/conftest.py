"""A real gdrstored on loopback for each test module, started from the build tree
(GDRSTORED_BIN) with a port file, and ended by the PID this fixture started."""

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


class Daemon:
    def __init__(self, *flags):
        self.dir = tempfile.mkdtemp(prefix="gdrstore-py-")
        port_file = os.path.join(self.dir, "port")
        binary = os.environ.get("GDRSTORED_BIN", os.path.join(HERE, "..", "..", "build",
                                                               "daemon", "gdrstored"))
        self.log = open(os.path.join(self.dir, "gdrstored.log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--port-file", port_file, *flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gdrstored did not start: see {self.log.name}")
            time.sleep(0.02)
        with open(port_file) as f:
            self.address = f"127.0.0.1:{int(f.read())}"

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--volume", "vol0=64MiB", "--volume", "rw=64MiB")
    yield d
    d.stop()


def pytest_configure(config):
    # scripts/run-tests.sh runs these alone first, then the rest on parallel workers (xdist):
    # a test comparing a measured rate with a model needs the machine to itself.
    config.addinivalue_line("markers", "serial: measures against a model; run without "
                                       "other tests beside it")
