"""`gdrctl doctor --json` for real on the first verbs device (SoftRoCE rxe0 in the test guest,
tests/rxe/run-in-guest.sh), against a real gdrstored serving rc on that device: the device and
port pass, the active MTU comes from ibv_query_port, DC is skipped because the device is not
mlx5, there is no GPU, and the daemon offers rc. Exits 77 (ctest: skipped) without a device.

usage: doctor_rxe_test.py GDRCTL GDRSTORED
"""
import json
import os
import subprocess
import sys
import tempfile
import time

GDRCTL, GDRSTORED = sys.argv[1:3]
devices = sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir(
    "/sys/class/infiniband") else []
if not devices:
    print("SKIP: no verbs device on this host (runs inside the SoftRoCE guest)")
    sys.exit(77)
dev = devices[0]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory(prefix="gdr-doctor-rxe.") as tmp:
    port_file = f"{tmp}/port"
    daemon = subprocess.Popen([GDRSTORED, "--listen", "127.0.0.1:0", "--port-file", port_file,
                               "--rdma-device", dev, "--volume", "vol0=16MiB",
                               "--log-level", "warning"])
    try:
        for _ in range(1200):  # start-up poll (a TCG guest is slow), 120 s at most
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            check(daemon.poll() is None, "gdrstored exited during start-up")
            time.sleep(0.1)
        address = "127.0.0.1:" + open(port_file).read().strip()
        p = subprocess.run([GDRCTL, "--daemon", address, "--json", "doctor"],
                           capture_output=True, text=True, timeout=300)
        print(p.stdout, p.stderr, sep="")
        check(p.returncode == 0, f"exit {p.returncode} (a FAIL where none is expected)")
        report = json.loads(p.stdout)
        s = {(c["check"], c["subject"]): c for c in report["checks"]}

        def status(check_id, subject=""):
            return s.get((check_id, subject), {}).get("status")

        port = f"{dev} port 1"
        check(status("rdma.devices") == "PASS", "rdma.devices PASS")
        check(status("rdma.port", port) == "PASS", "rdma.port PASS")
        check(status("rdma.gid", port) == "PASS", "a RoCE v2 GID")
        mtu = s.get(("rdma.mtu", port), {})
        check(mtu.get("status") in ("PASS", "WARN") and "ibv_query_port" in mtu.get("found", ""),
              f"MTU from a live port query: {mtu}")
        dc = s.get(("rdma.dc", dev), {})
        check(dc.get("status") == "SKIP" and ("not an mlx5 device" in dc.get("found", "") or
                                              "no mlx5dv" in dc.get("found", "")),
              f"dc skipped: not mlx5: {dc}")
        check(status("gpu") == "SKIP", "no GPU: SKIP")
        d = s.get(("daemon", address), {})
        check(d.get("status") == "PASS" and "rc" in d.get("found", ""), f"daemon offers rc: {d}")
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)

if failures:
    sys.exit(1)
print("doctor on", dev, ": as expected")
