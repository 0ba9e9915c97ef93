"""MLPerf Storage v3's KV-cache options (gdrstore.workload.kvcache_mlperf) against a real daemon
at a tiny scale: each option runs two clients with its JSON checked against the clients' own
logs (the read bandwidth is the bytes read over the trial's wall time, each P95 the largest
client's P95 as numpy computes a percentile, tokens/s the tokens generated over the wall time,
the scored figure the median of the trials) and every deviation from the closed run named. The
prefix-reuse extra's bandwidth is an aggregate over the run's wall time. Bad arguments are
refused naming the flag."""

import math
import os
import statistics
import subprocess
import sys

import numpy
import pytest

from conftest import HERE, Daemon

from gdrstore import workload
from gdrstore.workload import kvcache
from gdrstore.workload import kvcache_mlperf as ml
from gdrstore.workload import kvcache_serving as serving

PY = os.path.join(HERE, "..", "..", "python")
GIB = 1 << 30
# Two users a client for a second and a half. Seed 42's are a document reader thinking at most
# 1.43 s and a chatbot thinking at most 0.45 s: each asks, the chatbot three times or more.
# Contexts at 1/1000 of their tokens: entries of a few 64 KiB chunks.
TINY = dict(ranks=2, users=2, duration_s=1.5, scale=0.001, chunk=64 << 10, ring=2,
            storage_bytes=64 << 20)


@pytest.fixture(scope="module")
def d():
    daemon = Daemon()
    yield daemon
    daemon.stop()


def _check_trial(t, reads=True):
    logs = t["per_rank"]
    assert [x["rank"] for x in logs] == [0, 1]
    wall = max(x["run_s"] for x in logs)
    read = sum(x["storage_read_bytes"] for x in logs)
    assert t["wall_s"] == wall
    assert t["storage_read_bytes"] == read and (read > 0 or not reads)
    assert t["read_gib_per_s"] == pytest.approx(read / wall / GIB)
    assert t["tokens_per_s"] == pytest.approx(sum(x["tokens"] for x in logs) / wall)
    assert t["requests"] == sum(x["requests"] for x in logs) >= 4
    for what, key in (("storage_read_ms", "read_p95_ms"), ("storage_write_ms", "write_p95_ms")):
        p95 = [numpy.percentile(x[what], 95) for x in logs if x[what]]
        assert t[key] == (pytest.approx(max(p95)) if p95 else None)


def _check_scored(r):
    for key in ("read_gib_per_s", "read_p95_ms", "write_p95_ms", "tokens_per_s"):
        have = [t[key] for t in r["trials"] if t[key] is not None]
        assert r[key] == (pytest.approx(statistics.median(have)) if have else None)


def test_8b_200u_reads_its_entries_back_from_storage(d):
    cfg = ml.MlperfKvConfig(option=ml.option_named("8b-200u"),
                            target=workload.Target(daemons=[d.address]), trials=1,
                            prefix="wl-kvml-a", **TINY)
    r = ml.run(cfg)
    assert (r["option"], r["model"], r["closed"]) == ("8b-200u", "llama3.1-8b", False)
    p = r["parameters"]
    assert (p["users_per_client"], p["trials"], p["seed"]) == (2, 1, 42)
    assert p["bytes_per_token"] == 32 * 8 * 128 * 2 * 2
    assert p["cpu_tier_bytes"] == p["gpu_tier_bytes"] == 0
    assert p["max_concurrent_allocs"] == 16
    text = "\n".join(r["deviations"])
    for named in ("duration: 1.5 s a trial, not 300 s", "users per client: 2, not 200",
                  "trials: 1, not 3", "scaled by 0.001", "gdrstored volume"):
        assert named in text
    assert "seed" not in text
    (t,) = r["trials"]
    _check_trial(t)
    _check_scored(r)
    for x in t["per_rank"]:
        # No CPU tier: every entry is written to storage and each decode read comes from it.
        assert x["cpu_write_bytes"] == x["cpu_read_bytes"] == 0
        assert x["storage_write_bytes"] > 0 and x["hits"] == len(x["storage_read_ms"])


def test_8b_100u_cpu4g_fills_its_cpu_tier_then_moves_entries_down(d):
    # A CPU tier of 8 chunks (512 KiB): entries of up to 7 chunks go there first, and once it
    # passes 80 % the least recently used move down to storage. The chatbot user of seed 42
    # thinks at most 0.45 s, so asks 4 times in 2 s, each entry 2 chunks or more: the fourth
    # cannot fit without a move.
    cfg = ml.MlperfKvConfig(option=ml.option_named("8b-100u-cpu4g"),
                            target=workload.Target(daemons=[d.address]), trials=2,
                            cpu_bytes=8 * (64 << 10), prefix="wl-kvml-b",
                            **dict(TINY, duration_s=2.0))
    r = ml.run(cfg)
    p = r["parameters"]
    assert (p["cpu_tier_bytes"], p["max_concurrent_allocs"]) == (8 * (64 << 10), 0)
    assert f"a CPU tier of {8 * (64 << 10)} bytes per client, not {int(4 * GIB * 0.001)}" in \
        r["deviations"]
    assert len(r["trials"]) == 2
    for t in r["trials"]:
        _check_trial(t, reads=False)
        for x in t["per_rank"]:
            assert x["cpu_write_bytes"] > 0 and x["demoted_bytes"] > 0
    _check_scored(r)


def test_70b_70u_moves_320_kib_a_token(d):
    cfg = ml.MlperfKvConfig(option=ml.option_named("70b-70u"),
                            target=workload.Target(daemons=[d.address]), trials=1,
                            prefix="wl-kvml-c", **TINY)
    r = ml.run(cfg)
    assert (r["option"], r["model"]) == ("70b-70u", "llama3.1-70b-instruct")
    assert r["parameters"]["bytes_per_token"] == 80 * 8 * 128 * 2 * 2
    assert r["parameters"]["max_concurrent_allocs"] == 4
    _check_trial(r["trials"][0])
    _check_scored(r)


def test_a_full_storage_tier_deletes_its_least_recently_used_entries(d):
    # 70b-70u's storage tier cut to the least it takes: two of the largest entries (250 chunks).
    # The users' own request sequences (a function of the seed) say what their prefills write
    # in the run's first half; more than the tier holds must delete entries to make room.
    cfg = ml.MlperfKvConfig(option=ml.option_named("70b-70u"),
                            target=workload.Target(daemons=[d.address]), trials=1,
                            prefix="wl-kvml-e", **dict(TINY, ranks=1, users=12, duration_s=2.0,
                                                       storage_bytes=250 * (64 << 10)))
    asked = 0
    for u in serving.users(42, 12):
        at = 0.0
        for think_s, r in serving.requests(42, u, cfg.scale):
            at += think_s
            if at > cfg.duration_s / 2:
                break
            asked += math.ceil(r.context * 80 * 8 * 128 * 2 * 2 / cfg.chunk)
    assert asked > 250
    r = ml.run(cfg)
    assert r["parameters"]["storage_tier_bytes"] == 250 * (64 << 10)
    (x,) = r["trials"][0]["per_rank"]
    assert x["evictions"] > 0
    assert x["storage_write_bytes"] > 250 * (64 << 10)


def test_prefix_reuse_bandwidth_is_an_aggregate_over_wall_time(d):
    # Two ranks load prefixes at once: their bytes over the run's wall time, not over the sum
    # of their load times (which counts the time they overlap twice).
    cfg = kvcache.KvConfig(model=kvcache.model_named("qwen2.5-7b"),
                           target=workload.Target(daemons=[d.address]), ranks=2, requests=10,
                           prefixes=2, prefix_tokens=32, suffix_tokens=16, capacity=4096,
                           prefix="wl-kv-wall")
    r = kvcache.run(cfg)
    wall = max(x["run_s"] for x in r["per_rank"])
    got = sum(x["bytes_got"] for x in r["per_rank"])
    assert got > 0
    assert r["wall_s"] == wall
    assert r["get_gb_per_s"] == pytest.approx(got / wall / 1e9)


@pytest.mark.parametrize("args,needle", [
    (["--option", "8b-300u"], "--option '8b-300u' is not one of 8b-200u, 8b-100u-cpu4g, "
                              "70b-70u"),
    (["--option", "8b-200u", "--users", "0"], "--users 0 is outside [1, 10000]"),
    (["--option", "8b-200u", "--duration", "0"], "--duration 0.0 s is outside (0, 86400]"),
    (["--option", "8b-200u", "--scale", "2"], "--scale 2.0 is outside (0, 1]"),
    (["--option", "70b-70u", "--storage-bytes", "1MiB"], "holds fewer than two of the largest "
                                                          "entries"),
    (["--option", "8b-200u", "--requests", "5"], "--requests is a flag of the prefix-reuse "
                                                 "mode, not of --option"),
    (["--users", "5"], "--users needs --option"),
])
def test_bad_arguments_are_named(d, args, needle):
    env = dict(os.environ, PYTHONPATH=PY)
    p = subprocess.run([sys.executable, "-m", "gdrstore.workload", "kvcache", *args,
                        "--daemon", d.address], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr, p.stderr
