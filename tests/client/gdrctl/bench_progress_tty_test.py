"""`gdrctl bench`'s live progress line, against a real gdrstored on loopback: with stderr on a
pseudo-terminal the line appears (ops done/total, current rate, elapsed, eta) and is cleared at
the end; with -q, with --json (before or after the subcommand) and with stderr on a pipe there
is none, and the result still comes on stdout.

The daemon's volume is given a simulated bandwidth (8 MiB/s), so 24 MiB of ops take at least
3 s on any machine and the once-a-second line has to show up.

usage: bench_progress_tty_test.py GDRCTL GDRSTORED
"""
import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import time

GDRCTL, GDRSTORED = sys.argv[1:3]
failures = []
BENCH = ["bench", "-n", "24", "-s", "1MiB", "--qd", "1", "--span", "8MiB"]


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run_on_tty(args):
    """Runs gdrctl with stderr on a pty and stdout on a pipe; returns (rc, stdout, stderr)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    err = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            p.kill()
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: every holder of the slave end has closed it
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read()
    rc = p.wait(timeout=60)
    os.close(master)
    print("$", " ".join(args[3:]), "->", rc)
    print("stdout:", out.decode(errors="replace").strip())
    print("stderr:", repr(err.decode(errors="replace")))
    return rc, out.decode(errors="replace"), err.decode(errors="replace")


with tempfile.TemporaryDirectory(prefix="gdr-progress.") as tmp:
    port_file = f"{tmp}/port"
    daemon = subprocess.Popen([GDRSTORED, "--listen", "127.0.0.1:0", "--port-file", port_file,
                               "--volume", "vol0=16MiB,bandwidth=8MiB", "--log-level",
                               "warning"])
    try:
        for _ in range(600):  # start-up poll, 30 s at most
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        address = "127.0.0.1:" + open(port_file).read().strip()
        base = [GDRCTL, "--daemon", address]

        # On a terminal: at least one progress line, rewritten in place, then cleared.
        rc, out, err = run_on_tty(base + BENCH)
        check(rc == 0, f"tty: exit {rc}")
        check("write 1 MiB x 24" in out, "tty: result line on stdout")
        lines = [l for l in err.split("\r") if "/24 ops" in l]
        check(len(lines) >= 1, "tty: a progress line with ops done/total")
        for l in lines:
            for part in ("GB/s", "ops/s", "elapsed ", "eta "):
                check(part in l, f"tty: progress line has {part!r}: {l!r}")
        check(err.endswith("\r\x1b[K"), "tty: the progress line is cleared at the end")

        # -q, --json (global and after the subcommand): a terminal, yet no progress.
        for args, is_json in ((base + BENCH + ["-q"], False),
                              (base[:1] + ["--json"] + base[1:] + BENCH, True),
                              (base + BENCH + ["--json"], True)):
            rc, out, err = run_on_tty(args)
            what = " ".join(args[3:])
            check(rc == 0, f"{what}: exit {rc}")
            check("ops" not in err and "eta" not in err, f"{what}: no progress on stderr")
            if is_json:
                try:
                    doc = json.loads(out)
                    check(doc.get("ops") == 24, f"{what}: JSON result names 24 ops")
                except ValueError:
                    check(False, f"{what}: stdout is one JSON document")

        # stderr on a pipe: no progress either.
        p = subprocess.run(base + BENCH, capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"pipe: exit {p.returncode}")
        check(p.stderr == "", f"pipe: nothing on stderr: {p.stderr!r}")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)

print("FAILED:" if failures else "ok", len(failures), "failure(s)")
sys.exit(1 if failures else 0)
