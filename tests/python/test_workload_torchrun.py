"""Ranks on several hosts (docs/workloads.md "Ranks on several hosts"): two network namespaces
made here stand for two client hosts joined by a veth pair, the daemon listening in the first
on its veth address. A train run under torchrun on both reports every rank, each from its own
host, in rank 0's report alone; a rank failing on one host ends the run on the other with that
rank's error (started as an Indexed Job's pods are: JOB_COMPLETION_INDEX, no torchrun); rank
0 takes the volumes away either way. What ranks compare of their arguments leaves out a host's
own, and hostile launcher environments are refused by name."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

import pytest

from conftest import HERE

from gdrstore import InvalidArgument

PY = os.path.join(HERE, "..", "..", "python")
GDRSTORED = os.environ.get("GDRSTORED_BIN", os.path.join(HERE, "..", "..", "build", "daemon",
                                                         "gdrstored"))
TORCHRUN = "/usr/bin/torchrun"
NET = "10.231.0"            # inside the namespaces made here only
ADDRESS = [f"{NET}.1", f"{NET}.2"]
DAEMON = f"{ADDRESS[0]}:50051"
# A tiny train run: 64 KiB samples, 2 a batch, 3 steps a rank; a client host of 1 MiB keeps
# the dataset (5 x its RAM by the closed rule) to the steps' samples.
TRAIN = ["train", "--daemon", DAEMON, "--model", "unet3d", "--sample-bytes", "64KiB",
         "--sample-stdev", "0", "--samples-per-file", "1", "--batch", "2", "--steps", "3",
         "--epochs", "1", "--compute-time", "0.001", "--read-threads", "1", "--scale", "0.05",
         "--client-host-memory", str(1 / 1024), "--au-threshold", "0.0001", "--deadline", "120",
         "--timeout", "30"]


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


class _Hosts:
    """Two namespaces with the daemon in the first; `run` starts a command in one."""

    def __init__(self, names, daemon, scratch):
        self.names = names
        self.daemon = daemon
        self.scratch = scratch

    def run(self, host, argv, env=None):
        e = dict(os.environ, PYTHONPATH=PY, OMP_NUM_THREADS="1", **(env or {}))
        return subprocess.Popen(["ip", "netns", "exec", self.names[host], *argv], env=e,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def volumes(self, prefix):
        """The daemon's volumes named PREFIX-..., asked from inside the first namespace."""
        code = ("import json, gdrstore\n"
                f"with gdrstore.Client({DAEMON!r}) as c:\n"
                "    print(json.dumps([v['name'] for v in c.info().get('volumes', [])]))")
        p = self.run(0, [sys.executable, "-c", code])
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        return [n for n in json.loads(out) if n.startswith(prefix + "-")]


def _finish(procs):
    """Each process's (returncode, stdout, stderr); one still running past its bound is ended
    by its PID (this test started it)."""
    done = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        done.append((p.returncode, out, err))
    return done


@pytest.fixture(scope="module")
def two_hosts():
    if os.geteuid() != 0:
        pytest.skip("needs root: the two client hosts are network namespaces (ip netns add)")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` (iproute2) to make network namespaces with")
    if not os.path.exists(TORCHRUN):
        pytest.skip(f"no {TORCHRUN} (Debian's python3-torch)")
    tag = f"gw{os.getpid()}"  # unique to this run: only these are taken away at the end
    names = [f"gdrwl-{tag}-a", f"gdrwl-{tag}-b"]
    made = []
    daemon = None
    scratch = tempfile.mkdtemp(prefix="gdrstore-hosts-")
    try:
        for n in names:
            r = _ip("netns", "add", n)
            if r.returncode != 0:
                pytest.skip(f"`ip netns add` failed: {r.stderr.strip()}")
            made.append(n)
        steps = [["-n", names[0], "link", "add", f"{tag}a", "type", "veth", "peer", "name",
                  f"{tag}b", "netns", names[1]]]
        for i, n in enumerate(names):
            dev = f"{tag}{'ab'[i]}"
            steps += [["-n", n, "addr", "add", f"{ADDRESS[i]}/24", "dev", dev],
                      ["-n", n, "link", "set", dev, "up"], ["-n", n, "link", "set", "lo", "up"]]
        for s in steps:
            r = _ip(*s)
            if r.returncode != 0:
                pytest.skip(f"`ip {' '.join(s)}` failed: {r.stderr.strip()}")
        port_file = os.path.join(scratch, "port")
        log = open(os.path.join(scratch, "gdrstored.log"), "wb")
        # `ip netns exec` execs the daemon itself: this PID is the daemon's. --insecure: its
        # address is reachable from the two namespaces alone.
        daemon = subprocess.Popen(["ip", "netns", "exec", names[0], GDRSTORED, "--listen",
                                   DAEMON, "--port-file", port_file, "--insecure"], stdout=log,
                                  stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            if daemon.poll() is not None or time.monotonic() > deadline:
                with open(log.name) as f:
                    pytest.fail(f"gdrstored did not start: {f.read()}")
            time.sleep(0.02)
        yield _Hosts(names, daemon, scratch)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.terminate()
            daemon.wait(timeout=30)
        for n in made:
            _ip("netns", "del", n)
        shutil.rmtree(scratch, ignore_errors=True)


def _worker_stdout(log_dir, local_rank):
    """What a torchrun worker wrote to stdout (its log under --log_dir RUN/attempt_0/RANK/)."""
    found = glob.glob(os.path.join(log_dir, "*", "attempt_0", str(local_rank), "stdout.log"))
    assert len(found) == 1, found
    with open(found[0]) as f:
        return f.read()


def test_torchrun_on_two_hosts_reports_every_rank_from_its_host(two_hosts):
    # torchrun on each host, a rank each (every process imports torch: seconds each). Debian
    # 12's torchrun (torch 1.13 on Python 3.11) starts no worker with --redirects or --tee 0
    # or 3, their defaults included (Python 3.11's IntFlag no longer lists Std.NONE or
    # Std.ALL, so Std.from_str answers None): 1 sends each worker's stdout to its log under
    # --log_dir and, prefixed, to the console.
    logs = [os.path.join(two_hosts.scratch, f"torchrun-{i}") for i in range(2)]
    procs = [two_hosts.run(i, [TORCHRUN, "--nnodes", "2", "--nproc_per_node", "1",
                               "--node_rank", str(i), "--master_addr", ADDRESS[0],
                               "--master_port", "29400", "--monitor_interval", "0.1",
                               "--redirects", "1", "--tee", "1", "--log_dir", logs[i],
                               "-m", "gdrstore.workload", *TRAIN, "--prefix", "wl-hosts",
                               "--json"])
             for i in range(2)]
    (rc0, _, err0), (rc1, _, err1) = _finish(procs)
    assert rc0 == 0, err0
    assert rc1 == 0, err1
    assert _worker_stdout(logs[1], 0) == "", "only rank 0 reports"
    r = json.loads(_worker_stdout(logs[0], 0))
    assert r["hosts"]["launcher"] == "torchrun" and r["hosts"]["processes"] == 2
    assert r["hosts"]["hosts"] == 2 and r["client_hosts"] == 2  # the dataset rule counts both
    assert r["ranks"] == 2
    assert [x["rank"] for x in r["per_rank"]] == [0, 1]
    # Each rank's result came from its own host: the address it reaches MASTER_ADDR from.
    assert [x["host"]["address"] for x in r["per_rank"]] == ADDRESS
    for x in r["per_rank"]:
        assert x["steps"] == 3 and x["bytes_read"] == 3 * 2 * 64 * 1024, x
    assert two_hosts.volumes("wl-hosts") == [], "rank 0 takes the volumes away"


def test_a_rank_failing_on_one_host_ends_the_run_on_the_other_with_its_error(two_hosts):
    # One rank per pod, as an Indexed Job runs them. The second host's rank is given a daemon
    # address where nothing listens: its clients cannot connect, and that is the run's error.
    procs = []
    for i in range(2):
        argv = list(TRAIN)
        if i == 1:
            argv[argv.index(DAEMON)] = f"{ADDRESS[1]}:1"
        env = {"JOB_COMPLETION_INDEX": str(i), "WORLD_SIZE": "2", "MASTER_ADDR": ADDRESS[0],
               "MASTER_PORT": "29401"}
        procs.append(two_hosts.run(i, [sys.executable, "-m", "gdrstore.workload", *argv,
                                       "--launcher", "torchrun", "--prefix", "wl-hostfail"],
                                   env))
    done = _finish(procs)
    for rc, out, err in done:
        assert rc == 3, err
        assert out == ""
    firsts = [err.splitlines()[0] for _, _, err in done]
    assert firsts[0].startswith("gdrctl workload train: rank 1: Unavailable: "), done[0][2]
    assert firsts[0] == firsts[1], "every host ends with the failed rank's error"
    assert two_hosts.volumes("wl-hostfail") == []


def test_the_arguments_ranks_compare_leave_out_a_hosts_own():
    # Each run's start compares these digests over gloo (Session._exchange): a field of the
    # run differing is named; the target, the GPUs and the time left, a process's own, never
    # are (a --find-max-accelerators search hands each run its own count of the time left).
    from gdrstore.workload import Target, hosts, train
    m = train.model_with("unet3d")
    cfg = train.TrainConfig(model=m, target=Target(daemons=["10.0.0.1:1"]), seed=1)
    same = hosts.fingerprint((cfg, 7))
    mine = hosts.fingerprint((replace(cfg, target=Target(daemons=["10.0.0.2:1"]),
                                      gpus=("1",), deadline_s=cfg.deadline_s - 1), 7))
    assert mine == same
    other = hosts.fingerprint((replace(cfg, seed=2), 8))
    assert sorted(k for k in same if same[k] != other[k]) == ["TrainConfig.seed", "argument 1"]


@pytest.mark.parametrize("env,needle", [
    ({}, "RANK (or JOB_COMPLETION_INDEX), WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set"),
    ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "RANK 2 is outside [0, 1]"),
    ({"JOB_COMPLETION_INDEX": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "JOB_COMPLETION_INDEX 'x' is not an integer"),
    ({"RANK": "0", "WORLD_SIZE": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "WORLD_SIZE 0 is outside [1, 1024]"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "h", "MASTER_PORT": "65536"},
     "MASTER_PORT 65536 is outside [1, 65535]"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "a b", "MASTER_PORT": "1"},
     "MASTER_ADDR 'a b' is not a host name or address"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1",
      "GROUP_WORLD_SIZE": "3"}, "GROUP_WORLD_SIZE 3 is outside [1, 2]"),
])
def test_a_hostile_launcher_environment_is_named(env, needle):
    from gdrstore.workload import hosts
    with pytest.raises(InvalidArgument, match=re.escape(needle)):
        hosts.configure("torchrun", env)


def test_launcher_torchrun_without_its_environment_is_a_usage_error():
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "JOB_COMPLETION_INDEX", "WORLD_SIZE", "MASTER_ADDR",
                        "MASTER_PORT")}
    p = subprocess.run([sys.executable, "-m", "gdrstore.workload", "train", "--launcher",
                        "torchrun"], env=dict(env, PYTHONPATH=PY), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "--launcher torchrun: RANK (or JOB_COMPLETION_INDEX)" in p.stderr, p.stderr
