"""The real `gdrctl doctor` binary on fake host trees (fake_host_tree), against a real gdrstored
on loopback: the JSON parses, every check a tree decides has the status that tree calls for,
live probes are off on a tree that is not this host's, and the exit code is 1 exactly when a
check FAILs.

usage: doctor_cli_test.py GDRCTL FAKE_HOST_TREE GDRSTORED
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

GDRCTL, TREE, GDRSTORED = sys.argv[1:4]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def cap_ipc_lock():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 14))
    return False


def doctor(root, daemon, memlock=None, json_out=True, extra=()):
    def limit():
        if memlock is not None:
            hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock, min(memlock, hard)))
    args = [GDRCTL, "--daemon", daemon]
    if json_out:
        args.append("--json")
    args += ["doctor", "--sysfs-root", root + "/sys", "--proc-root", root + "/proc", *extra]
    p = subprocess.run(args, capture_output=True, text=True, preexec_fn=limit, timeout=60)
    print("$", " ".join(args), "->", p.returncode)
    print(p.stdout, p.stderr, sep="")
    return p


def statuses(report):
    out = {}
    for c in report["checks"]:
        for key in ("check", "subject", "status", "found", "advice"):
            check(key in c, f"line without {key}: {c}")
        out[(c["check"], c["subject"])] = c
    return out


with tempfile.TemporaryDirectory(prefix="gdr-doctor-cli.") as tmp:
    for kind in ("healthy", "faulty"):
        subprocess.run([TREE, f"{tmp}/{kind}", kind], check=True)
    port_file = f"{tmp}/port"
    daemon = subprocess.Popen([GDRSTORED, "--listen", "127.0.0.1:0", "--port-file", port_file,
                               "--volume", "vol0=16MiB", "--log-level", "warning"])
    try:
        for _ in range(600):  # start-up poll, 30 s at most
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        port = open(port_file).read().strip()
        address = f"127.0.0.1:{port}"

        # Healthy tree, the live daemon: no FAIL, exit 0.
        p = doctor(f"{tmp}/healthy", address)
        check(p.returncode == 0, f"healthy: exit {p.returncode}")
        report = json.loads(p.stdout)
        s = statuses(report)
        check(report["sysfs_root"] == f"{tmp}/healthy/sys", "sysfs_root echoed")
        for key in [("rdma.devices", ""), ("rdma.port", "mlx5_0 port 1"),
                    ("rdma.gid", "mlx5_1 port 1"), ("rdma.mtu", "mlx5_0 port 1"),
                    ("rdma.sriov", "mlx5_0"), ("iommu", "mlx5_1 0000:83:00.0"),
                    ("gpu.nic", "GPU 0000:04:00.0"), ("pcie.acs", "GPU 0000:84:00.0"),
                    ("gpu.bar1", "GPU 0000:04:00.0"), ("gpu.registration", ""),
                    ("net.arp", "eth2"), ("net.arp", "eth3")]:
            check(s.get(key, {}).get("status") == "PASS", f"healthy {key}: {s.get(key)}")
        check("derived from the netdev MTU" in s[("rdma.mtu", "mlx5_0 port 1")]["found"],
              "MTU derived from sysfs while live probes are off")
        # Live probes are off on a tree that is not this host's.
        check(s[("rdma.dc", "mlx5_0")]["status"] == "SKIP", "dc not probed on a fake tree")
        check(s[("gpu", "")]["status"] == "SKIP", "CUDA not asked on a fake tree")
        # This daemon has no RDMA device: reachable, tcp only.
        d = s[("daemon", address)]
        check(d["status"] == "WARN" and "offers tcp" in d["found"], f"daemon line: {d}")
        check(report["summary"]["fail"] == 0, "healthy: no FAIL in the summary")

        # Faulty tree, memlock 64 KiB, no daemon at the address given: FAILs, exit 1.
        p = doctor(f"{tmp}/faulty", "127.0.0.1:1", memlock=64 << 10)
        check(p.returncode == 1, f"faulty: exit {p.returncode}")
        s = statuses(json.loads(p.stdout))
        want = {
            ("rdma.port", "mlx5_1 port 1"): "WARN",
            ("rdma.gid", "mlx5_0 port 1"): "FAIL",
            ("rdma.mtu", "mlx5_0 port 1"): "WARN",
            ("rdma.sriov", "mlx5_1"): "WARN",
            ("iommu", "GPU 0000:04:00.0"): "WARN",
            ("memlock", ""): "PASS" if cap_ipc_lock() else "WARN",
            ("gpu.registration", ""): "FAIL",
            ("gpu.nic", "GPU 0000:84:00.0"): "WARN",
            ("pcie.acs", "GPU 0000:04:00.0"): "WARN",
            ("gpu.bar1", "GPU 0000:04:00.0"): "WARN",
            ("net.arp", "eth2"): "WARN",
            ("daemon", "127.0.0.1:1"): "FAIL",
        }
        for key, status in want.items():
            got = s.get(key, {})
            check(got.get("status") == status, f"faulty {key}: want {status}, got {got}")
            if status != "PASS":
                check(got.get("advice"), f"faulty {key}: no advice")
        check("64 KiB" in s[("memlock", "")]["found"], "memlock value reported")

        # --needs tcp (a tcp-only pod's readiness check): the faulty tree's RDMA-path faults are
        # SKIP, saying why, and nothing else changes (memlock's value is still reported).
        p = doctor(f"{tmp}/faulty", "127.0.0.1:1", extra=["--needs", "tcp"])
        report = json.loads(p.stdout)
        s = statuses(report)
        rdma = [c for c in report["checks"] if c["check"].startswith("rdma.")]
        check(rdma and all(c["status"] in ("SKIP", "PASS") for c in rdma),
              f"--needs tcp: RDMA lines SKIP or PASS: {rdma}")
        check(s[("rdma.gid", "mlx5_0 port 1")]["advice"].startswith("not needed with --needs tcp"),
              f"--needs tcp: the reason given: {s[('rdma.gid', 'mlx5_0 port 1')]}")
        check(p.returncode == (1 if report["summary"]["fail"] else 0),
              "--needs tcp: exit status follows the FAILs left")
        check("RLIMIT_MEMLOCK" in s[("memlock", "")]["found"] and
              s[("memlock", "")]["status"] != "SKIP", "--needs tcp: memlock still checked")
        check(s[("daemon", "127.0.0.1:1")]["status"] == "FAIL",
              "--needs tcp: a daemon named and absent still fails")
        p = doctor(f"{tmp}/faulty", "127.0.0.1:1", extra=["--needs", "udp"])
        check(p.returncode == 2, f"--needs udp: usage error, exit {p.returncode}")
        # Text form: the same verdicts, advice lines, the summary, the same exit code.
        p = doctor(f"{tmp}/faulty", "127.0.0.1:1", json_out=False)
        check(p.returncode == 1, "text: exit 1")
        check("FAIL rdma.gid" in p.stdout and "     -> " in p.stdout, "text lines and advice")
        check("summary:" in p.stdout.splitlines()[-1], "text summary last")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    # SIGTERM is a clean stop: exit 0. A sanitized build's daemon exits 86 on a report (a leak
    # found at exit included; scripts/sanitize-tests.sh).
    check(daemon.returncode == 0, f"gdrstored after SIGTERM: exit {daemon.returncode}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("doctor CLI: all checks passed")
