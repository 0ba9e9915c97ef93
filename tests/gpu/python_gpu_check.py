"""The Python package with GPU memory it does not own: a torch CUDA tensor and a CuPy array,
moved in place both ways over tcp and checked against the volume's pattern; then the 4 KiB
stream rate from Python. Usage: python_gpu_check.py HOST:PORT. Prints PASS/FAIL lines, and
exits non-zero when a check failed."""

import sys
import time

import gdrstore

MiB = 1 << 20
failed = 0


def check(ok, what):
    global failed
    print(("PASS: " if ok else "FAIL: ") + what)
    failed += 0 if ok else 1


def main(address):
    c = gdrstore.Client(address)
    import torch
    t = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda:0")
    check(c.get("vol0", 4096, into=t) == t.numel(), "torch CUDA tensor: get 64 MiB")
    gdrstore.verify(t, "vol0", 4096)
    check(True, "torch CUDA tensor: the volume's bytes are in the tensor")
    src = torch.arange(16 * MiB, dtype=torch.int32, device="cuda:0")
    c.put(src, "rw", 0)
    back = torch.zeros_like(src)
    c.get("rw", 0, into=back)
    check(bool(torch.equal(src, back)), "torch CUDA tensor: put then get back")
    try:
        c.get("vol0", 0, into=t[:, None][::2])
        check(False, "torch: a non-contiguous tensor is refused")
    except ValueError:
        check(True, "torch: a non-contiguous tensor is refused")
    try:
        import cupy
    except ImportError as e:
        check(False, f"cupy imports ({e})")
    else:
        a = cupy.empty(8 * MiB, dtype=cupy.uint8)
        c.get("vol0", 12345, into=a)
        gdrstore.verify(a, "vol0", 12345)
        check(True, "CuPy array: get 8 MiB in place, verified")
        b = cupy.arange(MiB, dtype=cupy.float32)
        c.put(b, "rw", 64 * MiB)
        b2 = cupy.zeros_like(b)
        c.get("rw", 64 * MiB, into=b2)
        check(bool((b == b2).all()), "CuPy array: put then get back")
    # The cluster API on GPU memory: a members file naming this daemon alone (one member, R = 1:
    # logical bytes are the member's bytes), a CUDA tensor put and got back in place.
    import json
    import os
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"members": [{"id": "gpu-host", "address": address}],
                   "volumes": [{"name": "rw", "stripe_unit": 4 * MiB, "members": ["gpu-host"],
                                "replicas": 1, "size": 256 * MiB}]}, f)
    try:
        with gdrstore.Cluster(members_file=f.name) as cl:
            src = torch.arange(4 * MiB, dtype=torch.int32, device="cuda:0")  # 16 MiB
            cl.put(src, "rw", 128 * MiB + 4097)
            back = torch.zeros_like(src)
            cl.get("rw", 128 * MiB + 4097, into=back)
            check(bool(torch.equal(src, back)), "cluster: CUDA tensor put then get back, 16 MiB")
            got = torch.zeros(16 * MiB, dtype=torch.uint8, device="cuda:0")
            c.get("rw", 128 * MiB + 4097, into=got)
            check(bool(torch.equal(got, src.view(torch.uint8))),
                  "cluster: the member holds the tensor's bytes where the layout puts them")
    finally:
        os.unlink(f.name)
    # Python's overhead on the stream path: 4 KiB gets at queue depth 32 into host memory.
    import numpy as np
    h = np.zeros(32 * 4096, dtype=np.uint8)
    c.register(h)
    slots = [h[i * 4096:(i + 1) * 4096] for i in range(32)]
    n = 20000
    with c.stream() as s:
        start = time.monotonic()
        inflight = []
        for i in range(n):
            inflight.append(s.get("vol0", (i % 1024) * 4096, into=slots[i % 32]))
            if len(inflight) == 32:
                inflight.pop(0).result()
        for f in inflight:
            f.result()
        secs = time.monotonic() - start
    print(f"python stream 4 KiB gets, qd 32: {n / secs:.0f} ops/s")
    # 64 MiB into a CUDA tensor from Python, qd 1, against the same through gdrctl's loop.
    reps = 16
    start = time.monotonic()
    for _ in range(reps):
        c.get("vol0", 0, into=t)
    secs = time.monotonic() - start
    print(f"python get 64 MiB into a CUDA tensor, qd 1: {reps * 64 * MiB / secs / 1e9:.3f} GB/s")
    c.close()
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)
