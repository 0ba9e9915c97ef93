"""Streams and many threads hand over any number of ops: the library holds what the daemon's
in-flight limits would refuse (unless fail_when_full), and every op, unary or on a Stream, ends
by its deadline even when the daemon is stopped (SIGSTOP)."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import gdrstore
from conftest import Daemon


@pytest.fixture(scope="module")
def tight():
    # A 1 MiB byte budget and 4 ops per stream: far below what the tests hand over at once.
    d = Daemon("--volume", "vol0=64MiB", "--max-inflight-bytes", "1MiB",
               "--max-inflight-per-stream", "4", "--max-inflight-ops", "6")
    yield d
    d.stop()


def test_a_stream_handed_more_than_the_daemon_admits_completes_every_op(tight):
    n, size = 48, 256 * 1024
    dst = np.zeros(n * size, dtype=np.uint8)
    with gdrstore.Client(tight.address) as c:
        with c.stream() as s:
            futures = [s.get("vol0", i * size, dst[i * size:(i + 1) * size]) for i in range(n)]
            assert [f.result(timeout=120) for f in futures] == [size] * n
        gdrstore.verify(dst, "vol0", 0)


def test_fail_when_full_returns_the_daemons_refusal(tight):
    n, size = 48, 256 * 1024
    dst = np.zeros(n * size, dtype=np.uint8)
    with gdrstore.Client(tight.address, fail_when_full=True) as c:
        with c.stream() as s:
            futures = [s.get("vol0", i * size, dst[i * size:(i + 1) * size]) for i in range(n)]
            errors = [f.exception(timeout=120) for f in futures]
    refused = [e for e in errors if e is not None]
    assert refused, "no op was refused although the burst is 12x the daemon's byte budget"
    for e in refused:
        assert isinstance(e, gdrstore.ResourceExhausted), e
        assert "max_inflight" in str(e)


def test_unary_gets_from_many_threads_at_once_all_complete(tight):
    size, threads, each = 192 * 1024, 12, 6
    failures = []
    with gdrstore.Client(tight.address) as c:
        def work(t):
            buf = np.zeros(size, dtype=np.uint8)
            for i in range(each):
                off = (t * each + i) * size
                try:
                    assert c.get("vol0", off, buf) == size
                    gdrstore.verify(buf, "vol0", off)
                except Exception as e:  # collected for the assertion below
                    failures.append(e)
        ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert failures == []


def test_stream_and_unary_ops_on_a_stopped_daemon_end_at_their_deadline():
    d = Daemon("--volume", "vol0=8MiB")
    try:
        buf = np.zeros(4096, dtype=np.uint8)
        with gdrstore.Client(d.address, timeout=2) as c:
            assert c.get("vol0", 0, buf) == 4096
            s = c.stream()
            assert s.get("vol0", 0, buf).result(timeout=30) == 4096
            _stop(d.proc.pid)
            try:
                t0 = time.monotonic()
                fut = s.get("vol0", 4096, buf)
                e = fut.exception(timeout=30)  # TimeoutError here: the op never ended
                took = time.monotonic() - t0
                assert isinstance(e, gdrstore.DeadlineExceeded), e
                assert took >= 1.9
                with pytest.raises(gdrstore.DeadlineExceeded):
                    c.get("vol0", 0, buf)
                # Closing the stream gives up on the stopped daemon instead of waiting for it.
                closer = threading.Thread(target=lambda: _close_quietly(s))
                closer.start()
                closer.join(30)
                assert not closer.is_alive(), "Stream.close waited on a stopped daemon"
            finally:
                os.kill(d.proc.pid, signal.SIGCONT)
            # Once resumed, the daemon serves again (after it has caught up with what waited).
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert c.get("vol0", 0, buf) == 4096
                    break
                except gdrstore.DeadlineExceeded:
                    if time.monotonic() > deadline:
                        raise
    finally:
        d.stop()


def _stop(pid):
    """SIGSTOP, and wait until every thread of `pid` has stopped (delivery is asynchronous)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop")


def _close_quietly(stream):
    try:
        stream.close()
    except gdrstore.Error:
        pass  # the call was cancelled: its status says so
