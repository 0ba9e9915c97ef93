#!/usr/bin/env python3
"""What a CUDA context costs a process that already page-locked host memory (issue 45's
4-GPU checkpoint profile): the daemon page-locks its volumes portable (cuMemHostRegister,
CU_MEMHOSTREGISTER_PORTABLE) in GPU 0's context, and opens a context on another GPU only when
a client's memory there is first imported. This times, through the driver API alone:
  1. GPU 0's primary context (cuDevicePrimaryCtxRetain, then a 1-byte cuMemAlloc);
  2. page-locking --gib GiB of anonymous memory portable in 128 MiB pieces, GB/s;
  3. each other GPU's primary context made after that;
  4. page-locking one more GiB once every context exists, GB/s.
usage: bench/context_cost.py [--gib N]   (needs libcuda.so.1 and at least one GPU)
"""
import argparse
import ctypes
import mmap
import sys
import time

PIECE = 128 << 20
PORTABLE = 0x01


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=32, help="GiB page-locked before the contexts")
    a = ap.parse_args()
    if a.gib < 1:
        ap.error("--gib must be at least 1")
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print(f"context_cost: SKIP: no CUDA driver ({e})")
        return 0

    def ok(r: int, what: str) -> None:
        if r != 0:
            raise SystemExit(f"context_cost: {what} failed: CUresult {r}")

    ok(cu.cuInit(0), "cuInit")
    n = ctypes.c_int()
    ok(cu.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]

    def context(i: int) -> float:
        t = time.perf_counter()
        dev, ctx, p = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
        ok(cu.cuDeviceGet(ctypes.byref(dev), i), "cuDeviceGet")
        ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        ok(cu.cuMemAlloc_v2(ctypes.byref(p), 1), "cuMemAlloc")
        return time.perf_counter() - t

    maps = []

    def lock(gib: int) -> float:
        # Resident first (MAP_POPULATE), as a memory volume's pages are.
        m = mmap.mmap(-1, gib << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS |
                      getattr(mmap, "MAP_POPULATE", 0x8000))
        maps.append(m)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        t = time.perf_counter()
        for off in range(0, gib << 30, PIECE):
            ok(cu.cuMemHostRegister_v2(base + off, PIECE, PORTABLE), "cuMemHostRegister")
        return (gib << 30) / (time.perf_counter() - t) / 1e9

    print(f"context_cost: {n.value} GPU(s)")
    print(f"GPU 0 context, nothing locked: {context(0) * 1e3:.1f} ms")
    print(f"page-locked {a.gib} GiB portable in 128 MiB pieces, 1 context: {lock(a.gib):.2f} GB/s")
    for i in range(1, n.value):
        print(f"GPU {i} context, {a.gib} GiB locked before it: {context(i) * 1e3:.1f} ms")
    print(f"1 GiB more, {n.value} context(s): {lock(1):.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
