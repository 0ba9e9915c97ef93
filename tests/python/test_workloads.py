"""gdrstore.workload against real daemons: each workload at a tiny scale with its result
checked against what its inputs imply, the AU property (a media model too slow for the
accelerators pulls AU below the threshold as predicted, a fast one does not), a checkpoint over
file volumes with the cache clear, hostile inputs refused naming the field, a daemon killed
mid-run reported as the rank's own error (not the clean-up's), and `gdrctl workload` with a
trace that `gdrctl replay` plays back."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import HERE, Daemon

import gdrstore
from gdrstore import workload
from gdrstore.workload import checkpoint, kvcache, train

PY = os.path.join(HERE, "..", "..", "python")
GDRCTL = os.environ.get("GDRCTL_BIN", os.path.join(HERE, "..", "..", "build", "client", "gdrctl"))
AU_TOLERANCE = 0.1  # absolute: measured AU against the bandwidth model's prediction


@pytest.fixture(scope="module")
def d():
    daemon = Daemon()
    yield daemon
    daemon.stop()


def _no_workload_volumes(address):
    with gdrstore.Client(address) as c:
        return [v["name"] for v in c.info().get("volumes", []) if v["name"].startswith("wl")]


def test_train_reads_every_sample_of_its_steps(d):
    t = workload.Target(daemons=[d.address])
    cfg = train.TrainConfig(model=train.model_with("resnet50", compute_s=0.02), target=t,
                            ranks=2, scale=0.001, steps=3, epochs=1, client_memory=1 << 30,
                            prefix="wl-train")
    r = train.run(cfg)
    layout = train.lay_out(cfg)
    assert r["workload"] == "train" and r["model"] == "resnet50" and r["scaled"]
    assert r["files"] == layout.files and r["samples"] == len(layout.samples)
    assert r["parameters"]["batch"] == 400 and r["parameters"]["au_threshold"] == 0.9
    for rank in r["per_rank"]:
        assert rank["steps"] == len(train.rank_steps(layout, cfg, rank["rank"], 1)) == 3
        assert rank["samples_verified"] == 3 * 400
        # resnet50's TFRecord pipeline reads its files' records in order, up to the last one
        # its batches take.
        reads = train.rank_reads(layout, cfg, rank["rank"], 1)
        assert rank["bytes_read"] == sum(s.length for s in reads)
        assert 0 < rank["au"] <= 1.0
        assert len(rank["step_wait_s"]) == 3
    # One epoch: the run's AU is the ranks' mean; the lowest rank's is reported beside it.
    assert r["au"] == pytest.approx(sum(x["au"] for x in r["per_rank"]) / 2)
    assert r["au_min_rank"] == min(x["au"] for x in r["per_rank"])
    assert r["passed"] == (r["au"] >= 0.9)
    assert _no_workload_volumes(d.address) == []


@pytest.mark.serial  # AU against a model: run alone, not beside the parallel workers
@pytest.mark.parametrize("bandwidth,slow", [(80 << 20, True), (1600 << 20, False)])
def test_au_follows_the_media_bandwidth(d, bandwidth, slow):
    # 2 accelerators, each needing 4 x 1 MiB every 50 ms (80 MiB/s): a volume reading 80 MiB/s
    # gives each half that (AU 0.5); one reading 1600 MiB/s keeps both busy.
    m = train.model_with("unet3d", sample_bytes=1 << 20, sample_stdev=0, samples_per_file=1,
                         batch=4, compute_s=0.05, read_threads=2)
    t = workload.Target(daemons=[d.address])
    cfg = train.TrainConfig(model=m, target=t, ranks=2, scale=0.001, steps=14, epochs=1,
                            client_memory=1 << 20, media=f"read_bandwidth={bandwidth}",
                            prefix="wl-au")
    predicted = train.predicted_au(m, bandwidth, 2)
    r = train.run(cfg)
    if slow:
        assert predicted == pytest.approx(0.5)
        assert abs(r["au"] - predicted) <= AU_TOLERANCE, r["per_rank"]
        assert not r["passed"]
    else:
        assert predicted == 1.0
        assert r["au"] >= 0.9 and r["passed"], r["per_rank"]


def test_checkpoint_over_file_volumes_reads_back_what_it_wrote():
    with tempfile.TemporaryDirectory() as root:
        dd = Daemon("--volume-dir", root + ",writable")
        try:
            t = workload.Target(daemons=[dd.address])
            cfg = checkpoint.CheckpointConfig(model=checkpoint.model_named("llama3-8b"),
                                              target=t, ranks=3, scale=0.0004, chunk=4 << 20,
                                              writes=1, reads=1, interval_s=0.0, file=True,
                                              prefix="wl-ckpt")
            sizes = [sum(b for _, b in checkpoint.rank_files(cfg, r)) for r in range(3)]
            r = checkpoint.run(cfg)
            # llama3-8b is ZeRO-3: each rank writes an eighth of the model and the optimizer.
            assert len(set(sizes)) == 1
            assert r["checkpoint_bytes"] == sum(sizes)
            assert r["model_ranks"] == 8 and r["ranks"] == 3
            assert "page cache" in r["cache_clear"]["how"]
            for phase in ("write", "read"):
                moved = sum(x["checkpoints"][0]["bytes"] for x in r["per_rank"][phase])
                assert moved == sum(sizes)
                c = r[phase]["per_checkpoint"][0]
                assert c["duration_s"] == max(x["checkpoints"][0]["seconds"]
                                              for x in r["per_rank"][phase])
            assert [x["rank"] for x in r["per_rank"]["read"]] == [0, 1, 2]
            left = [f for _, _, fs in os.walk(root) for f in fs]
            assert left == []
        finally:
            dd.stop()


def test_kvcache_hits_are_the_prefixes_seen_before(d):
    t = workload.Target(daemons=[d.address])
    cfg = kvcache.KvConfig(model=kvcache.model_named("qwen2.5-7b"), target=t, requests=60,
                           prefixes=4, prefix_tokens=64, suffix_tokens=16, capacity=4096,
                           prefix="wl-kv")
    seen, hits, blocks = set(), 0, 0
    for pid, plen, slen in kvcache.requests(cfg, 0):
        blocks += (plen + slen) // cfg.block_tokens
        if pid in seen:
            hits += plen // cfg.block_tokens
        seen.add(pid)
    r = kvcache.run(cfg)
    assert r["hit_rate"] == pytest.approx(hits / blocks)
    assert r["evictions"] == 0
    assert r["get_ms"]["count"] == hits
    assert r["per_rank"][0]["bytes_got"] == hits * cfg.block_bytes
    assert r["parameters"]["block_bytes"] == 28 * 4 * 128 * 2 * 2 * 16


def test_a_small_cache_evicts(d):
    t = workload.Target(daemons=[d.address])
    cfg = kvcache.KvConfig(model=kvcache.model_named("qwen2.5-7b"), target=t, requests=40,
                           prefixes=8, prefix_tokens=64, suffix_tokens=16, capacity=6,
                           prefix="wl-kv-small")
    r = kvcache.run(cfg)
    assert r["evictions"] > 0
    assert r["hit_rate"] < 0.5


@pytest.mark.parametrize("args,needle", [
    (["train", "--model", "bert"], "--model 'bert'"),
    (["train", "--scale", "0"], "--scale 0"),
    (["train", "--ranks", "0"], "--ranks 0"),
    (["train", "--daemon", "nohost"], "--daemon 'nohost'"),
    (["train", "--gpu", "zz:00.0"], "--gpu 'zz:00.0'"),
    (["checkpoint", "--chunk", "1000"], "--chunk 1000"),
    (["checkpoint", "--model", "llama3-2t"], "--model 'llama3-2t'"),
    (["kvcache", "--zipf", "-1"], "--zipf -1"),
    (["kvcache", "--capacity", "0"], "--capacity 0"),
])
def test_bad_arguments_are_named(d, args, needle):
    env = dict(os.environ, PYTHONPATH=PY)
    extra = [] if "--daemon" in args else ["--daemon", d.address]
    p = subprocess.run([sys.executable, "-m", "gdrstore.workload", *args, *extra], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr, p.stderr


def test_a_run_through_the_agent_with_no_daemon_says_why_it_dials_one():
    # The agent makes no volumes: a run naming only --agent dials the default daemon, and its
    # failure must say that, not only "connection refused".
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    env = dict(os.environ, PYTHONPATH=PY)
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([sys.executable, "-m", "gdrstore.workload", "checkpoint", "--scale",
                            "0.001", "--agent", os.path.join(tmp, "agent.sock"), "--daemon",
                            closed, "--deadline", "60", "--timeout", "10"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    assert f"made on daemon {closed} (the agent makes no volumes" in p.stderr, p.stderr


def test_a_daemon_killed_mid_run_is_reported_as_the_ranks_error_not_the_clean_ups():
    # The daemon dies under a running checkpoint. Every rank's ops fail, and so does the
    # clean-up after them (the volumes cannot be taken away: connection refused); stderr must
    # lead with a rank's own error and status, the clean-up's only after it.
    dd = Daemon()
    env = dict(os.environ, PYTHONPATH=PY)
    # The volumes' media model holds puts to 1 MiB/s each: ~28 MB to write cannot be done
    # before the kill, which waits only for the first puts to be answered (a put is the
    # daemon's Read RPC: its stats count it in read_ops).
    p = subprocess.Popen([sys.executable, "-m", "gdrstore.workload", "checkpoint", "--daemon",
                          dd.address, "--scale", "0.001", "--ranks", "2", "--chunk", "64KiB",
                          "--qd", "1", "--media", "write_bandwidth=1048576", "--timeout", "30",
                          "--num-checkpoints-write", "1", "--num-checkpoints-read", "1",
                          "--interval", "0", "--deadline", "300", "--prefix", "wl-kill"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        with gdrstore.Client(dd.address) as c:
            while int(c.stats().get("total", {}).get("read_ops", 0)) < 2:
                assert p.poll() is None, p.communicate()
                assert time.monotonic() < deadline, "the run wrote nothing in 120 s"
                time.sleep(0.05)
        os.kill(dd.proc.pid, signal.SIGKILL)
        dd.proc.wait(timeout=30)
        _, err = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        dd.stop()
    assert p.returncode == 3, err
    lines = err.splitlines()
    assert re.match(r"gdrctl workload checkpoint: rank [01]: Unavailable: ", lines[0]), err
    # The clean-up's failures come after, marked as such, never in the rank error's place.
    cleanup = [i for i, line in enumerate(lines) if "then, taking volume wl-kill-" in line]
    assert cleanup and min(cleanup) > 0, err
    assert all(lines[i].startswith("  then, ") for i in cleanup), err


def test_gdrctl_workload_traced_and_replayed():
    if not os.path.exists(GDRCTL):
        pytest.skip(f"no gdrctl at {GDRCTL} (build the tree, or set GDRCTL_BIN)")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "ops.trace")
        dd = Daemon("--trace", trace)
        try:
            out = os.path.join(tmp, "out")
            p = subprocess.run([GDRCTL, "--daemon", dd.address, "--json", "workload", "kvcache",
                                "--requests", "20", "--prefixes", "2", "--prefix-tokens", "32",
                                "--model", "qwen2.5-7b", "--keep", "--out", out],
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, p.stderr
            r = json.loads(p.stdout)
            assert r["workload"] == "kvcache" and r["hit_rate"] > 0
            assert os.path.exists(os.path.join(out, "result.json"))
            assert r.get("plots") or r.get("plots_skipped")
            for plot in r.get("plots", []):
                with open(plot, "rb") as f:
                    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
            os.rename(trace, trace + ".1")
            os.kill(dd.proc.pid, signal.SIGHUP)  # closes the renamed trace, flushed
            deadline = time.monotonic() + 30
            while not os.path.exists(trace) and time.monotonic() < deadline:
                time.sleep(0.05)
            p = subprocess.run([GDRCTL, "--daemon", dd.address, "--json", "replay",
                                trace + ".1"], capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, p.stdout + p.stderr
            replayed = json.loads(p.stdout.strip().splitlines()[-1])["replayed"]
            # A hit is a get of its block, a miss a put of it: the trace holds exactly those.
            assert replayed["get"]["ops"] == r["per_rank"][0]["block_hits"]
            assert replayed["put"]["ops"] == r["per_rank"][0]["block_misses"]
            assert replayed["failed"] == 0
        finally:
            dd.stop()
