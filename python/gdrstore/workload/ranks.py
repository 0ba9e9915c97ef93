"""One process per simulated accelerator: each rank runs `body(rank, ranks, args, barrier)` in
a fresh interpreter (spawned, so CUDA and the library start clean in each), with its own
clients and buffers, and hands back a dict. The ranks start their measured part together at the
barrier. A rank that fails ends the run with its error (raised with the rank's own status
code): the first of a rank that failed for a reason of its own, preferred to that of a rank
which only saw the barrier break, though such an error can arrive first (the failing rank
aborts the barrier before it posts its error). A run past its deadline is ended, its ranks
stopped (this process started them), and named. Stopping the ranks never replaces that error.
Under torchrun or an Indexed Job (hosts.py) this process runs only its own rank, and the ranks
share their barrier, results and errors over gloo instead."""

import multiprocessing
import os
import queue
import signal
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import DeadlineExceeded, Error, Unknown, from_status
from .cleanup import Cleanup, notes

_STOP_GRACE_S = 5.0
# How long the run, told of an error that a broken barrier caused, waits for the error that
# broke it (the failing rank posts it just after its abort) before it raises the one it has.
_ROOT_WAIT_S = 5.0


def describe(e: BaseException) -> Tuple[int, str]:
    """A rank's error as it crosses to the other processes: its status code (Unknown's for one
    not of the library) and its text: the error, the rank's own clean-up's after it, then where
    it was raised (the frames alone: Python 3.11's full format would print the notes twice)."""
    code = e.code if isinstance(e, Error) else Unknown.code
    text = "".join(f"\n  {n}" for n in notes(e))
    frames = "".join(traceback.format_tb(e.__traceback__, limit=4))
    return code, (f"{type(e).__name__}: {e}{text}\nTraceback (most recent call last):\n"
                  f"{frames.rstrip()}")


def rank_error(rank: int, code: int, text: str) -> Error:
    """Rank `rank`'s error (from describe) as the run raises it: of its status class, naming
    the rank, with `rank` set."""
    failure = from_status(code, f"rank {rank}: {text}")
    failure.rank = rank
    return failure


def _rank_main(body, rank: int, ranks: int, args: Any, barrier, results) -> None:
    """Posts (rank, result, error, broken): broken says the barrier was broken before this
    rank's error, which most likely follows from that (another rank's failure)."""
    try:
        results.put((rank, body(rank, ranks, args, barrier), None, False))
    except BaseException as e:  # report it; the parent ends the run
        broken = barrier.broken
        try:
            barrier.abort()  # the others stop waiting for this rank
        finally:
            results.put((rank, None, describe(e), broken))


def run(body: Callable[..., Dict[str, Any]], ranks: int, args: Any,
        deadline_s: float) -> List[Dict[str, Any]]:
    """Runs `ranks` processes of `body`; their results in rank order. The error of the first
    rank that failed for a reason of its own (one that a broken barrier ended stands in only
    when no such error comes within _ROOT_WAIT_S), of its status class (Unavailable, DataLoss,
    ...; Error's Unknown for one not of the library) with `rank` set and a message naming the
    rank, or DeadlineExceeded (naming the ranks still running). Under torchrun or an Indexed
    Job, hosts.Session.run instead."""
    from . import hosts  # here, not at the top: hosts takes describe and rank_error from here
    session = hosts.session()
    if session is not None:
        return session.run(body, ranks, args, deadline_s)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(ranks)
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(body, r, ranks, args, barrier, results),
                         name=f"gdrstore-workload-rank{r}", daemon=True) for r in range(ranks)]
    for p in procs:
        p.start()
    out: Dict[int, Dict[str, Any]] = {}
    failure: Optional[Error] = None
    follower: Optional[Error] = None  # the first error of a rank the broken barrier ended
    end = time.monotonic() + deadline_s
    follow_end = end
    try:
        while len(out) < ranks and failure is None:
            now = time.monotonic()
            if follower is not None and now >= follow_end:  # the root said nothing in time
                failure = follower
                break
            left = end - now
            if left <= 0:
                running = [r for r in range(ranks) if r not in out]
                raise DeadlineExceeded(f"the workload ran past its deadline of {deadline_s:g} s; "
                                       f"ranks {running} were still running")
            try:
                rank, result, error, broken = results.get(timeout=min(left, follow_end - now,
                                                                      1.0))
            except queue.Empty:
                dead = [r for r, p in enumerate(procs)
                        if r not in out and p.exitcode is not None and p.exitcode != 0]
                if dead and results.empty():
                    failure = Unknown(f"rank {dead[0]} died (exit status "
                                      f"{procs[dead[0]].exitcode}) without a result")
                    failure.rank = dead[0]
                continue
            if error is None:
                out[rank] = result
            elif not broken:
                failure = rank_error(rank, *error)
            elif follower is None:
                follower = rank_error(rank, *error)
                follow_end = min(end, now + _ROOT_WAIT_S)
    except BaseException as e:  # past the deadline, or interrupted: no grace
        _stop(procs, e, False)
        raise
    _stop(procs, failure, failure is None)
    if failure is not None:
        raise failure
    return [out[r] for r in range(ranks)]


def _stop(procs, error: Optional[BaseException], grace: bool) -> None:
    """Ends every rank (after a grace period when the run went well); a failure here is
    noted on `error`, the run's own, rather than raised in its place."""
    c = Cleanup(error)
    for p in procs:
        c.run(f"joining {p.name}",
              lambda p=p: p.join(timeout=_STOP_GRACE_S if grace else 0.5))
    for p in procs:
        c.run(f"stopping {p.name}", lambda p=p: _end(p))
    c.raise_first()


def _end(p) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not p.is_alive() or p.pid is None:
            return
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:  # it ended (and was reaped) since is_alive()
            return
        p.join(timeout=_STOP_GRACE_S if sig == signal.SIGTERM else None)
