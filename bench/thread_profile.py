#!/usr/bin/env python3
"""Where a process's threads spend their time: samples /proc/PID/task/*/{comm,stat,syscall}
every few milliseconds and prints, per thread name, the share of samples each group of threads
was running (or runnable), blocked in futex (a lock or condition variable), in a socket send, in
a socket receive, in poll/epoll, or elsewhere. A profiler that needs nothing but /proc (the GPU
host has no perf): a serialised section shows as many threads of one name in futex while one of
them runs.

Usage: thread_profile.py PID [--seconds S] [--interval-ms MS] [--json]
"""
import argparse
import json
import os
import sys
import time

# x86_64 system call numbers; other architectures are reported by number under "other".
SYSCALLS = {
    202: "futex",
    0: "recv", 45: "recv", 47: "recv", 299: "recv",          # read recvfrom recvmsg recvmmsg
    1: "send", 20: "send", 44: "send", 46: "send", 307: "send",  # write writev sendto sendmsg sendmmsg
    7: "poll", 23: "poll", 232: "poll", 270: "poll", 271: "poll", 281: "poll", 441: "poll",
}
GROUPS = ["running", "futex", "send", "recv", "poll", "other"]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:  # the thread ended between listing and reading
        return None


def sample(pid):
    """One look at every thread: [(name, group)]."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        comm, stat, sysc = read(base + "/comm"), read(base + "/stat"), read(base + "/syscall")
        if comm is None or stat is None:
            continue
        state = stat[stat.rindex(")") + 2]
        if state == "R" or sysc is None or sysc.startswith("running"):
            group = "running"
        else:
            try:
                group = SYSCALLS.get(int(sysc.split()[0]), "other")
            except ValueError:
                group = "other"
        out.append((comm.strip(), group))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("pid", type=int)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--interval-ms", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(f"/proc/{a.pid}"):
        sys.exit(f"thread_profile: no process {a.pid}")
    counts = {}    # name -> group -> samples
    threads = {}   # name -> most threads of that name seen at once
    n = 0
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        s = sample(a.pid)
        if s is None:
            break
        n += 1
        seen = {}
        for name, group in s:
            counts.setdefault(name, dict.fromkeys(GROUPS, 0))[group] += 1
            seen[name] = seen.get(name, 0) + 1
        for name, k in seen.items():
            threads[name] = max(threads.get(name, 0), k)
        time.sleep(a.interval_ms / 1000.0)
    if n == 0:
        sys.exit(f"thread_profile: process {a.pid} ended before the first sample")
    rows = []
    for name, g in sorted(counts.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(g.values())
        rows.append({"name": name, "threads": threads[name],
                     "busy_threads": g["running"] / n,  # threads of this name running, on average
                     **{k: g[k] / total for k in GROUPS}})
    if a.json:
        print(json.dumps({"pid": a.pid, "samples": n, "rows": rows}))
        return
    print(f"pid {a.pid}: {n} samples over {a.seconds:.1f} s; share of each name's thread-samples")
    print(f"{'thread name':<18}{'threads':>8}{'busy':>7}" + "".join(f"{k:>9}" for k in GROUPS))
    for r in rows:
        print(f"{r['name']:<18}{r['threads']:>8}{r['busy_threads']:>7.2f}" +
              "".join(f"{100 * r[k]:>8.1f}%" for k in GROUPS))


if __name__ == "__main__":
    main()
