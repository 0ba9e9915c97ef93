"""gdrstore.workload.ranks, the spawner of rank processes: when one rank fails, the run raises
that rank's own error, not the error of a rank that only saw the barrier break under it, even
when that one reaches the parent first. No daemon: the ranks' bodies are this file's."""

import fcntl
import multiprocessing
import os
import tempfile

import pytest

from gdrstore import errors
from gdrstore.workload import ranks

_held = []  # rank 0's lock, open until its process ends


class _SaidLate(errors.DataLoss):
    """The failing rank's own error. Its text, which the rank composes only after it has
    aborted the barrier, waits until rank 0 has ended, so rank 0's error (the broken barrier's)
    is always in the parent's queue first: the order in which a plain race goes wrong."""

    def __init__(self, lock_path: str):
        super().__init__("the failing rank's own error")
        self.lock_path = lock_path

    def __str__(self) -> str:
        with open(self.lock_path) as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # free once rank 0's process has exited
        return super().__str__()


def _body(rank, _ranks, args, barrier):
    lock_path, holding = args
    if rank == 0:
        f = open(lock_path)
        fcntl.flock(f, fcntl.LOCK_EX)
        _held.append(f)
        holding.set()
        barrier.wait()  # broken by rank 1: BrokenBarrierError, a follower's error
        return {}
    holding.wait()
    raise _SaidLate(lock_path)


@pytest.mark.parametrize("attempt", range(3))
def test_the_failing_ranks_error_wins_over_the_broken_barriers(attempt):
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as d:
        lock_path = os.path.join(d, "rank0.lock")
        open(lock_path, "w").close()
        with pytest.raises(errors.Error) as got:
            ranks.run(_body, 2, (lock_path, ctx.Event()), deadline_s=120)
    # Before the fix: rank 0's "BrokenBarrierError", which arrived first, as Unknown.
    assert isinstance(got.value, errors.DataLoss), str(got.value)
    assert got.value.rank == 1
    assert "the failing rank's own error" in str(got.value)


def _breaks_then_fails(_rank, _ranks, _args, barrier):
    barrier.abort()
    raise ValueError("failed after the barrier broke")


def test_an_error_after_a_broken_barrier_ends_the_run_when_no_other_comes():
    # Every error follows a broken barrier: the run waits a bounded time for one of a rank's
    # own, then raises what it has, not DeadlineExceeded at the deadline.
    with pytest.raises(errors.Error) as got:
        ranks.run(_breaks_then_fails, 1, None, deadline_s=120)
    assert type(got.value) is errors.Unknown and got.value.rank == 0, str(got.value)
    assert "ValueError: failed after the barrier broke" in str(got.value)
