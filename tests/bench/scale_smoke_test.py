"""A short `gdr_bench --only scale` run against the real gdrstored (tiny sizes, 1 and 2 client
processes, no many-client lines, 1 repeat): the JSON has a bulk line per direction and client
count and a small-op line per client count, with numbers in them, each bulk line beside raw TCP
with a stream per tcp link its clients had and its share of that against one client's; the plot
is made where matplotlib is installed, and otherwise the run says so and leaves the data beside
it. Then a run whose clients fail (a one-link pool cannot serve two clients): exit 1 naming the
failure.

After each run no process gdr_bench started may be left: this test makes itself the child
subreaper, so anything gdr_bench left behind would be re-parented here and show up.

usage: scale_smoke_test.py GDR_BENCH
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

GDR_BENCH = sys.argv[1]
PR_SET_CHILD_SUBREAPER = 36
failures = []
SMALL = ["--only", "scale", "--scale-clients", "1,2", "--scale-many", "", "--repeats", "1",
         "--warmup", "0", "--scale-size", "1MiB", "--scale-ops", "4", "--scale-small-ops", "64"]


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def leftovers():
    """Processes whose parent is this test: what a run left behind (gdr_bench itself is reaped)."""
    out = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == me:
            out.append(f"{pid}: {cmd}")
    return out


def run(args, cwd):
    # Scratch files (a failed run keeps its clients' log) stay inside the test's directory.
    env = dict(os.environ, TMPDIR=cwd)
    p = subprocess.run([GDR_BENCH] + args, cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=600)
    print("$ gdr_bench", " ".join(repr(a) if a == "" else a for a in args), "->", p.returncode)
    print(p.stderr)
    left = leftovers()
    check(not left, f"processes left behind: {left}")
    return p


def has_matplotlib():
    return subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"],
                          capture_output=True).returncode == 0


if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    print("FAIL: prctl(PR_SET_CHILD_SUBREAPER)")
    sys.exit(1)

with tempfile.TemporaryDirectory(prefix="gdr-scale.") as tmp:
    png = f"{tmp}/plot.png"
    p = run(SMALL + ["--json", "--scale-plot", png], tmp)
    check(p.returncode == 0, f"exit {p.returncode}")
    doc = json.loads(p.stdout) if p.returncode == 0 else {}
    scale = doc.get("scale", {})
    check(doc.get("rows") == [], "no group but scale ran")
    check(scale.get("settings", {}).get("clients") == [1, 2], "clients 1,2")
    check(scale.get("settings", {}).get("size") == 1 << 20, "1 MiB ops")
    bulk = {(r["op"], r["clients"]): r for r in scale.get("bulk", [])}
    check(sorted(bulk) == [("read", 1), ("read", 2), ("write", 1), ("write", 2)],
          f"bulk lines: {sorted(bulk)}")
    for key, r in bulk.items():
        check(r["gbps"] > 0 and r["ops_per_sec"] > 0, f"{key}: product numbers")
        check(r["baseline_gbps"] > 0, f"{key}: baseline number")
        check(len(r["gbps_samples"]) == 1 and len(r["baseline_samples"]) == 1,
              f"{key}: one sample each")
        check(abs(r["ratio"] - r["gbps"] / r["baseline_gbps"]) < 1e-3, f"{key}: ratio")
        # The baseline runs a stream per tcp link the clients had: at least one per client.
        check(r.get("baseline_streams", 0) >= key[1]
              and len(r.get("baseline_streams_samples", [])) == 1,
              f"{key}: baseline streams {r.get('baseline_streams')} for {key[1]} clients")
        if key[1] == 1:
            check(r["efficiency"] == 1 and r["baseline_efficiency"] == 1,
                  f"{key}: efficiency of 1 client is 1")
            check(r.get("scaling") == 1, f"{key}: scaling of 1 client is 1")
        else:
            one = bulk[(key[0], 1)]
            want = r["gbps"] / (2 * one["gbps"])
            # The JSON's GB/s and efficiency are rounded to 4 decimals, the efficiency
            # computed from the unrounded rates: on a slow (sanitized) build, rates near
            # 0.05 GB/s make that rounding alone move `want` by ~1e-3.
            slack = 1e-3 + want * (0.00006 / r["gbps"] + 0.00006 / one["gbps"])
            check(abs(r["efficiency"] - want) < slack, f"{key}: efficiency = agg(2) / 2 agg(1)")
            # Rounded ratios as above: a stalled sample can make a ratio small.
            want = r["ratio"] / one["ratio"]
            slack = 1e-3 + want * (0.00006 / r["ratio"] + 0.00006 / one["ratio"])
            check(abs(r.get("scaling", -1) - want) < slack,
                  f"{key}: scaling {r.get('scaling')} = ratio(2) / ratio(1) = {want}")
    small = {r["clients"]: r for r in scale.get("small", [])}
    check(sorted(small) == [1, 2], f"small-op lines: {sorted(small)}")
    check(all(r["ops_per_sec"] > 0 for r in small.values()), "small-op ops/s")
    check(scale.get("many") == [], "no many-client lines with --scale-many ''")
    check(scale.get("gpu") is None, "no GPU line without --gpu")
    aims = [a["name"] for a in scale.get("aims", [])]
    check(any(a.startswith("Write / Read") for a in aims), f"aims: {aims}")
    check(any(a.startswith("scaling 1 -> 2 clients") and a.endswith("vs raw TCP")
              for a in aims), f"aims: {aims}")
    write2 = bulk.get(("write", 2), {}).get("baseline_streams", -1)
    check(f"Write 2 clients / raw TCP, {write2:.0f} streams" in aims, f"aims: {aims}")

    data = f"{tmp}/plot.json"
    check(os.path.exists(data), "the plot's data is written beside it")
    if os.path.exists(data):
        with open(data) as f:
            check(json.load(f) == scale, "the plot's data is the scale JSON")
    if has_matplotlib():
        check(os.path.exists(png), "plot written")
        if os.path.exists(png):
            with open(png, "rb") as f:
                check(f.read(8) == b"\x89PNG\r\n\x1a\n", "the plot is a PNG")
        check("plot: " + png in p.stderr, "the run names the plot")
    else:
        print("matplotlib missing: the plot itself is not checked")
        check(not os.path.exists(png), "no plot without matplotlib")
        check("has no matplotlib" in p.stderr and data in p.stderr,
              "the run says matplotlib is missing and where the data is")

    # Clients that fail: a daemon that fails every op with an injected DATA_LOSS. (Its
    # in-flight limits no longer fail clients: they wait for room.)
    p = run(SMALL + ["--daemon-flag=--fault=kind=error,code=DATA_LOSS", "--scale-plot", png], tmp)
    check(p.returncode == 1, f"failing clients: exit {p.returncode}")
    check("clients failed" in p.stderr and "DATA_LOSS" in p.stderr,
          "failing clients: the error names the failure")

    # A bad client list is refused before anything starts.
    p = run(["--only", "scale", "--scale-clients", "1,zero"], tmp)
    check(p.returncode == 2 and "--scale-clients" in p.stderr and "'zero'" in p.stderr,
          "bad --scale-clients")

print("FAILED:" if failures else "ok", len(failures), "failure(s)")
sys.exit(1 if failures else 0)
