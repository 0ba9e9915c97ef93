#!/usr/bin/env python3
"""How fast a pinned slot copies to the GPU depending on who wrote it last (issue 45).

The tcp target receives each chunk into a pinned slot with recv() and copies it to the GPU at
once; its copies measured ~60 us per 1 MiB on the GPU host where torch's pinned copies take ~21.
This copies the same 4 pinned slots round robin into a device buffer, one copy in flight at a
time (as a link does), and reports the copies' GPU time (events) and wall time per copy when the
slot was, before each copy: not touched (`idle`), filled by the CPU (`cpu`), or received from a
socket (`recv`, a second thread sending).

usage: python3 bench/staging_copy_probe.py [--sizes 1,4] [--copies 300] [--device 0]
"""
import argparse
import socket
import statistics
import threading
import time

import torch

_KERNEL_SRC = r"""
extern "C" __global__ void copy_mapped(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                       unsigned long long n16) {
  // Four 16-byte loads in flight a thread before any store: reads of host memory are long.
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n16; i += stride) dst[i] = src[i];
}
"""
_kernel = None


def kernel_copy(dst, src, n, stream, blocks):
    """dst (device tensor) <- src (pinned tensor) by the mapped-read kernel on `stream`."""
    global _kernel
    import cupy
    if _kernel is None:
        _kernel = cupy.RawKernel(_KERNEL_SRC, "copy_mapped")
    with cupy.cuda.ExternalStream(stream.cuda_stream):
        _kernel((blocks,), (256,), (cupy.uint64(src.data_ptr()), cupy.uint64(dst.data_ptr()),
                                    cupy.uint64(n // 16)))


def probe(mode, mib, copies, device, engine="ce", blocks=0):
    n = mib << 20
    slots = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for _ in range(4)]
    views = [memoryview(s.numpy()) for s in slots]
    dst = torch.empty(16 * n, dtype=torch.uint8, device=device)
    stream = torch.cuda.Stream(device=device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(copies)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(copies)]
    sender = None
    if mode == "recv":
        a, b = socket.socketpair()
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        payload = bytes(range(256)) * (n // 256)

        def send():
            for _ in range(copies):
                a.sendall(payload)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
    walls = []
    for i in range(copies):
        k = i % 4
        if i >= 4:
            ends[i - 4].synchronize()
        if mode == "cpu":
            slots[k].fill_(i & 255)
        elif mode == "recv":
            got = 0
            while got < n:
                got += b.recv_into(views[k][got:], n - got)
        t0 = time.perf_counter()
        with torch.cuda.stream(stream):
            starts[i].record(stream)
            if engine == "kernel":
                kernel_copy(dst[(i % 16) * n:], slots[k], n, stream, blocks)
            else:
                dst[(i % 16) * n:(i % 16 + 1) * n].copy_(slots[k], non_blocking=True)
            ends[i].record(stream)
        ends[i].synchronize()
        walls.append(time.perf_counter() - t0)
    if sender:
        sender.join(timeout=10)
    gpu = [starts[i].elapsed_time(ends[i]) * 1000 for i in range(10, copies)]
    wall = [w * 1e6 for w in walls[10:]]
    med_gpu = statistics.median(gpu)
    if engine == "kernel":
        ok = torch.equal(dst[((copies - 1) % 16) * n:((copies - 1) % 16 + 1) * n].cpu(),
                         slots[(copies - 1) % 4])
        assert ok, "the kernel's copy differs from its source"
    print(f"{engine:6s} {mode:5s} {mib:2d} MiB: GPU time p50 {med_gpu:7.1f} us ({mib * (1 << 20) / med_gpu / 1e3:5.1f} GB/s),"
          f" wall p50 {statistics.median(wall):7.1f} us, p90 GPU {sorted(gpu)[int(len(gpu) * .9)]:7.1f} us",
          flush=True)


def lagged(mib, copies, device, lag, threads=1):
    """recv into 8 slots, but copy slot i only after slots i+1..i+lag were received (the copy's
    source has been pushed out of the receiving core's cache by newer bytes); `threads`
    receivers at once, each with its own stream, report the summed GB/s of their copies."""
    n = mib << 20
    results = [None] * threads

    def one(t):
        slots = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for _ in range(8)]
        views = [memoryview(s.numpy()) for s in slots]
        dst = torch.empty(16 * n, dtype=torch.uint8, device=device)
        stream = torch.cuda.Stream(device=device)
        a, b = socket.socketpair()
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        payload = bytes(range(256)) * (n // 256)
        sender = threading.Thread(target=lambda: [a.sendall(payload) for _ in range(copies)],
                                  daemon=True)
        sender.start()
        ends = [None] * copies
        gpu = []
        starts = [None] * copies
        t0 = time.perf_counter()

        def issue(j):
            starts[j] = torch.cuda.Event(enable_timing=True)
            ends[j] = torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                starts[j].record(stream)
                dst[(j % 16) * n:(j % 16 + 1) * n].copy_(slots[j % 8], non_blocking=True)
                ends[j].record(stream)

        for i in range(copies):
            if i >= 8 and ends[i - 8] is not None:
                ends[i - 8].synchronize()
            got = 0
            while got < n:
                got += b.recv_into(views[i % 8][got:], n - got)
            if i - lag >= 0:
                issue(i - lag)
        for j in range(max(0, copies - lag), copies):
            issue(j)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        sender.join(timeout=10)
        gpu = [starts[j].elapsed_time(ends[j]) * 1000 for j in range(10, copies)]
        results[t] = (statistics.median(gpu), copies * n / wall / 1e9)

    ts = [threading.Thread(target=one, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    med = statistics.median(r[0] for r in results)
    print(f"recv {mib} MiB lag {lag} x{threads} threads: GPU time p50 {med:7.1f} us "
          f"({mib * (1 << 20) / med / 1e3:5.1f} GB/s a copy), received and copied "
          f"{sum(r[1] for r in results):5.1f} GB/s in all", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,4")
    ap.add_argument("--copies", type=int, default=300)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--lag", action="store_true", help="also the lagged and threaded runs")
    ap.add_argument("--engines", default="ce", help="ce, kernel or both (ce,kernel)")
    ap.add_argument("--blocks", default="0",
                    help="the kernel's blocks of 256 threads, comma list; 0: 4 per SM")
    a = ap.parse_args()
    dev = torch.device("cuda", a.device)
    torch.cuda.init()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for mib in (int(s) for s in a.sizes.split(",")):
        for mode in ("idle", "cpu", "recv", "idle"):
            for engine in a.engines.split(","):
                if engine == "kernel":
                    for b in (int(x) or 4 * sms for x in a.blocks.split(",")):
                        print(f"  kernel blocks {b}", end=": ", flush=True)
                        probe(mode, mib, a.copies, dev, engine, b)
                else:
                    probe(mode, mib, a.copies, dev, engine)
    if a.lag:
        for threads in (1, 4, 8):
            for lag in (0, 1, 2, 3, 4):
                lagged(1, a.copies, dev, lag, threads)


if __name__ == "__main__":
    main()
