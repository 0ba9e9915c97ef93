"""Closing in any order (issue 40): a Stream, Future, registration or memory that outlives its
Client (or Cluster), and closing anything twice, must fail later calls with
gdrstore.FailedPrecondition and free everything once. Each scenario runs in a child interpreter
against the module's real daemon, so that an abort (glibc's "double free detected", SIGABRT) or
a crash is seen as the child's signal instead of taking pytest down with it."""

import json
import os
import signal
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.join(HERE, "..", "..", "python")

# What every child starts with: the package, the daemon's address, and a check that a call
# raises what it must.
PRELUDE = """
import gc, os, sys, threading
import numpy as np
import gdrstore

ADDRESS = os.environ["GDR_TEST_ADDRESS"]
KiB = 1 << 10


def refused(fn, *args, exc=gdrstore.FailedPrecondition, words="closed", **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        assert words in str(e), f"{fn.__name__}: {e!r} does not say {words!r}"
        return
    raise AssertionError(f"{fn.__name__} did not raise {exc.__name__}")
"""


def run_child(daemon, body, env=None):
    """Runs PRELUDE + `body` in a fresh interpreter; it must exit 0 having printed DONE."""
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (PACKAGE_DIR, child_env.get("PYTHONPATH")) if p)
    child_env["GDR_TEST_ADDRESS"] = daemon.address
    child_env.update(env or {})
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                       env=child_env, capture_output=True, text=True, timeout=300)
    if r.returncode < 0:
        how = f"died of {signal.Signals(-r.returncode).name}"
    else:
        how = f"exited {r.returncode}"
    assert r.returncode == 0 and "DONE" in r.stdout, (
        f"child {how}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")


def test_stream_closed_after_a_client_whose_with_block_raised(daemon):
    # The defect as reported: the with block raises with ops in flight on a Stream, the
    # Client closes, the Futures resolve, and stream.close() after the block aborted the
    # process (free(): double free detected in tcache 2).
    run_child(daemon, """
        buf = bytearray(64 * 16 * KiB)  # no weak references: a registration per op
        futures, stream = [], None
        try:
            with gdrstore.Client(ADDRESS) as c:
                stream = c.stream()
                for i in range(64):
                    futures.append(stream.get("vol0", i * 16 * KiB, buf, length=16 * KiB,
                                              at=i * 16 * KiB))
                raise RuntimeError("the caller's own failure")
        except RuntimeError:
            pass
        outcomes = [f.exception() for f in futures]  # each resolves, one way or another
        stream.close()  # where the process aborted
        stream.close()
        assert outcomes == [None] * 64, outcomes[:4]  # the Client's close let every op finish
        assert [f.result() for f in futures] == [16 * KiB] * 64
        gdrstore.verify(buf, "vol0", 0)
        refused(stream.get, "vol0", 0, buf)
        refused(stream.put, buf, "vol0", 0)
        print("DONE")
    """)


def test_client_close_ends_its_streams_and_resolves_every_future(daemon):
    run_child(daemon, """
        c = gdrstore.Client(ADDRESS)
        dst = np.zeros(1 << 20, dtype=np.uint8)
        s = c.stream()
        futures = [s.get("vol0", i * 64 * KiB, dst, length=64 * KiB, at=i * 64 * KiB)
                   for i in range(16)]
        c.close()  # without waiting for the Futures first
        assert all(f.done() for f in futures)
        assert [f.result() for f in futures] == [64 * KiB] * 16
        gdrstore.verify(dst, "vol0", 0)
        refused(s.get, "vol0", 0, dst)
        s.close()  # closed by the Client already: nothing to do
        with s:    # nor on leaving a with block
            pass
        c.close()
        refused(c.stream)
        print("DONE")
    """)


def test_everything_of_a_closed_client_refuses_and_its_memory_stays(daemon):
    run_child(daemon, """
        c = gdrstore.Client(ADDRESS)
        arr = np.zeros(256 * KiB, dtype=np.uint8)
        c.register(arr)                   # a registration kept while arr lives
        mine = c.allocate(64 * KiB)       # the library's memory, a memoryview
        c.get("vol0", 0, into=arr)
        c.get("vol0", 0, into=mine)
        c.close()
        c.close()
        for call, args in ((c.get, ("vol0", 0, arr)), (c.put, (arr, "vol0", 0)),
                           (c.register, (arr,)), (c.allocate, (4096,)), (c.stream, ()),
                           (c.info, ()), (c.stats, ()), (c.create_volume, ("v", 4096)),
                           (c.delete_volume, ("v",))):
            refused(call, *args)
        assert c.registration_handles() == 0
        # allocate()'s memory stays mapped while referenced, and is let go once, later.
        gdrstore.verify(mine, "vol0", 0)
        gdrstore.verify(arr, "vol0", 0)
        mine[0] = 7
        del mine, arr
        gc.collect()
        print("DONE")
    """)


def test_streams_and_futures_closed_in_every_order(daemon):
    run_child(daemon, """
        dst = np.zeros(256 * KiB, dtype=np.uint8)
        # Stream closed first, then the Client; then the Stream again.
        c = gdrstore.Client(ADDRESS)
        s = c.stream()
        f = s.get("vol0", 0, dst, length=4 * KiB)
        s.close()
        c.close()
        s.close()
        assert f.result() == 4 * KiB and f.exception() is None
        # Futures, a Stream and a Client let go of in any order, collected by the GC.
        c = gdrstore.Client(ADDRESS)
        s = c.stream()
        kept = [s.get("vol0", i * 4 * KiB, dst, length=4 * KiB, at=i * 4 * KiB)
                for i in range(8)]
        del c
        gc.collect()
        s.close()
        del s
        gc.collect()
        assert [f.result() for f in kept] == [4 * KiB] * 8
        # Client closed, then the Stream, and only then the Futures asked for their answers.
        c = gdrstore.Client(ADDRESS)
        s = c.stream()
        kept = [s.get("vol0", i * 4 * KiB, dst, length=4 * KiB, at=i * 4 * KiB)
                for i in range(8)]
        c.close()
        s.close()
        assert [f.result() for f in kept] == [4 * KiB] * 8
        # A Stream never closed: the Client's close ends it.
        c = gdrstore.Client(ADDRESS)
        s = c.stream()
        f = s.put(dst, "rw", 0, length=4 * KiB)
        del s
        c.close()
        assert f.result() == 4 * KiB
        print("DONE")
    """)


def test_client_closed_while_another_thread_submits(daemon):
    run_child(daemon, """
        c = gdrstore.Client(ADDRESS)
        dst = np.zeros(64 * KiB, dtype=np.uint8)
        s = c.stream()
        futures, refusals = [], []
        started = threading.Event()

        def submit():
            while True:
                try:
                    futures.append(s.get("vol0", 0, dst, length=4 * KiB))
                except gdrstore.FailedPrecondition as e:
                    refusals.append(e)
                    return
                if len(futures) == 200:
                    started.set()

        t = threading.Thread(target=submit)
        t.start()
        started.wait()
        c.close()
        t.join()
        assert len(refusals) == 1 and "closed" in str(refusals[0]), refusals
        # Every op submitted got an answer or the reason it has none; none is left hanging.
        for f in futures:
            e = f.exception()
            assert e is None or isinstance(e, (gdrstore.Cancelled, gdrstore.FailedPrecondition)), e
        assert sum(f.exception() is None for f in futures) >= 200
        print("DONE")
    """)


def test_cluster_buffers_and_a_cluster_closed_in_any_order(daemon, tmp_path):
    members = tmp_path / "members.json"
    members.write_text(json.dumps({
        "members": [{"id": "m0", "address": daemon.address,
                     "volumes": [{"name": "vol0", "size": str(64 << 20)}]}],
        "volumes": [{"name": "vol0", "stripe_unit": str(1 << 20), "members": ["m0"],
                     "replicas": 1, "epoch": "1", "size": str(32 << 20)}]}))
    run_child(daemon, """
        dst = np.zeros(256 * KiB, dtype=np.uint8)
        try:
            with gdrstore.Cluster(members_file=os.environ["GDR_TEST_MEMBERS"]) as cl:
                cl.register(dst)
                assert cl.get("vol0", 0, into=dst) == 256 * KiB
                raise RuntimeError("the caller's own failure")
        except RuntimeError:
            pass
        gdrstore.verify(dst, "vol0", 0)
        refused(cl.get, "vol0", 0, dst)
        refused(cl.put, "vol0", 0, dst)
        refused(cl.register, dst)
        refused(cl.status)
        cl.close()
        assert cl.registration_handles() == 0
        del dst
        gc.collect()
        print("DONE")
    """, env={"GDR_TEST_MEMBERS": str(members)})


def test_a_close_that_fails_after_the_block_raised_is_noted_on_the_blocks_own_error():
    """With the daemon gone, closing a Stream (and the Client) fails too: the error the `with`
    block raised must be the one the caller sees, the close's failure noted on it (PEP 678),
    not put in its place."""
    import numpy as np
    import pytest
    from conftest import Daemon
    import gdrstore

    d = Daemon("--volume", "vol0=4MiB")
    try:
        buf = np.zeros(1 << 20, dtype=np.uint8)
        with pytest.raises(RuntimeError, match="the block's own error") as raised:
            with gdrstore.Client(d.address) as client:
                with client.stream() as s:
                    s.get("vol0", 0, buf).result()
                    d.stop(signal.SIGKILL)
                    s.get("vol0", 0, buf)  # in flight, or refused, with the daemon gone
                    raise RuntimeError("the block's own error")
        notes = getattr(raised.value, "__notes__", [])
        assert any(n.startswith("then, closing: ") for n in notes), notes
    finally:
        d.stop()
    # Without an error in the block, the close's own failure is raised as before.
    d = Daemon("--volume", "vol0=4MiB")
    try:
        with pytest.raises(gdrstore.Error):
            with gdrstore.Client(d.address) as client:
                with client.stream() as s:
                    s.get("vol0", 0, buf).result()
                    d.stop(signal.SIGKILL)
                    s.get("vol0", 0, buf)
    finally:
        d.stop()
