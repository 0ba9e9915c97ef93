"""One process per simulated accelerator: each rank runs `body(rank, ranks, args, barrier)` in
a fresh interpreter (spawned, so CUDA and the library start clean in each), with its own
clients and buffers, and hands back a dict. The ranks start their measured part together at the
barrier. A rank that fails ends the run with its error; a run past its deadline is ended, its
ranks stopped (this process started them), and named."""

import multiprocessing
import os
import queue
import time
import traceback
from typing import Any, Callable, Dict, List

from ..errors import DeadlineExceeded, Error

_STOP_GRACE_S = 5.0


def _rank_main(body, rank: int, ranks: int, args: Any, barrier, results) -> None:
    try:
        results.put((rank, body(rank, ranks, args, barrier), None))
    except BaseException as e:  # report it; the parent ends the run
        barrier.abort()
        results.put((rank, None, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"))


def run(body: Callable[..., Dict[str, Any]], ranks: int, args: Any,
        deadline_s: float) -> List[Dict[str, Any]]:
    """Runs `ranks` processes of `body`; their results in rank order. Error (the first failed
    rank's message, naming the rank) or DeadlineExceeded (naming the ranks still running)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(ranks)
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(body, r, ranks, args, barrier, results),
                         name=f"gdrstore-workload-rank{r}", daemon=True) for r in range(ranks)]
    for p in procs:
        p.start()
    out: Dict[int, Dict[str, Any]] = {}
    failure = None
    end = time.monotonic() + deadline_s
    try:
        while len(out) < ranks and failure is None:
            left = end - time.monotonic()
            if left <= 0:
                running = [r for r in range(ranks) if r not in out]
                raise DeadlineExceeded(f"the workload ran past its deadline of {deadline_s:g} s; "
                                       f"ranks {running} were still running")
            try:
                rank, result, error = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [r for r, p in enumerate(procs)
                        if r not in out and p.exitcode is not None and p.exitcode != 0]
                if dead and results.empty():
                    failure = (f"rank {dead[0]} died (exit status {procs[dead[0]].exitcode}) "
                               "without a result")
                continue
            if error is not None:
                failure = f"rank {rank}: {error}"
            else:
                out[rank] = result
    finally:
        for p in procs:
            p.join(timeout=_STOP_GRACE_S if failure is None else 0.5)
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, 15)
                p.join(timeout=_STOP_GRACE_S)
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, 9)
                p.join()
    if failure is not None:
        raise Error(failure)
    return [out[r] for r in range(ranks)]
