"""A workload process under torchrun or an Indexed Job leaves the ranks' gloo group before its
interpreter ends (hosts.Session.close), however the run ended. Left to the interpreter's exit,
a gloo worker that still held the last exchange's tensors took the GIL to free them while
Python finalized; Python ends such a thread with pthread_exit, which through torch's noexcept
frames is std::terminate: a rank that had printed its error died of SIGABRT instead of exiting
3 (seen under load on the two-host test). Here each run is one process of a world of one on
loopback: when the workload's main returns, the group is gone and none of its threads (torch
and gloo leave theirs unnamed, as the interpreter's own) is left to run during finalization."""

import importlib.util
import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import HERE

PY = os.path.join(HERE, "..", "..", "python")
TORCH_MISSING = importlib.util.find_spec("torch") is None

# Runs the workload's main in this process, then reports what is left of the ranks' group:
# whether torch still has it, and the threads the run started that carry the interpreter's
# own name (gRPC and the library name theirs; torch's and gloo's are unnamed).
_PROBE = """
import json, os, sys
def threads():
    return {t: open(f"/proc/self/task/{t}/comm").read().strip()
            for t in os.listdir("/proc/self/task")}
before = threads()
from gdrstore.workload.__main__ import main
import torch.distributed as dist
rc = main(sys.argv[1:])
unnamed = before[str(os.getpid())]
left = sorted(t for t, n in threads().items() if t not in before and n == unnamed)
print(json.dumps({"rc": rc, "group": dist.is_initialized(), "left": left}))
"""

TRAIN = ["train", "--model", "unet3d", "--sample-bytes", "64KiB", "--sample-stdev", "0",
         "--samples-per-file", "1", "--batch", "2", "--steps", "2", "--epochs", "1",
         "--compute-time", "0.001", "--read-threads", "1", "--scale", "0.05",
         "--client-host-memory", str(1 / 1024), "--au-threshold", "0.0001", "--deadline", "60",
         "--timeout", "10", "--launcher", "torchrun", "--json"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe(argv):
    env = dict(os.environ, PYTHONPATH=PY, OMP_NUM_THREADS="1", RANK="0", WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    p = subprocess.run([sys.executable, "-c", _PROBE, *argv], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr  # the probe's own exit (SIGABRT: -6)
    return json.loads(p.stdout.splitlines()[-1]), p.stderr


@pytest.mark.skipif(TORCH_MISSING, reason="no torch.distributed (Debian's python3-torch)")
def test_a_failed_run_leaves_the_ranks_group_before_the_interpreter_ends():
    # Nothing listens on port 1: the run's volumes cannot be made, which the rank tells the
    # group (Session.settle) before main returns 3.
    got, err = _probe([*TRAIN, "--daemon", "127.0.0.1:1", "--prefix", "wl-end-fail"])
    assert got["rc"] == 3, err
    assert "Connection refused" in err, err
    assert got["group"] is False, "the ranks' group outlived the run"
    assert got["left"] == [], f"threads of the ranks' group still running: {got['left']}"


@pytest.mark.skipif(TORCH_MISSING, reason="no torch.distributed (Debian's python3-torch)")
def test_a_run_that_passed_leaves_the_ranks_group_before_the_interpreter_ends(daemon):
    got, err = _probe([*TRAIN, "--daemon", daemon.address, "--prefix", "wl-end-pass"])
    assert got["rc"] == 0, err
    assert got["group"] is False, "the ranks' group outlived the run"
    assert got["left"] == [], f"threads of the ranks' group still running: {got['left']}"
