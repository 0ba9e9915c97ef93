#!/usr/bin/env python3
"""gdrstore.torch.memory_pool on the GPU host: tensors of 1 byte, 2 MiB + 1 and 100 MiB made in
the pool are VMM allocations shareable as a POSIX fd and GPUDirect-RDMA capable (asked of the
driver), go to a gdrstored this script starts over the local transport as a descriptor (path
local/vmm-fd, where the default allocator's tensor goes as local/cuda-ipc), take a get verified
against the volume's pattern and a put read back equal; once the tensors and the pool are gone
and torch.cuda.empty_cache() ran, each allocation is unmapped and the GPU has its memory back.
The hooks called directly: a free of what was freed already is refused and harms nothing; on a
host with two GPUs, a free on GPU 1 leaves the current device at 0.

usage: memory_pool_check.py GDRSTORED   (the gdrstored binary). Prints PASS/FAIL lines; exits
non-zero when a check failed."""

import contextlib
import ctypes
import gc
import os
import subprocess
import sys
import tempfile
import time

import torch

import gdrstore
import gdrstore.torch as gt

MiB = 1 << 20
SIZES = (1, 2 * MiB + 1, 100 * MiB)
failed = 0


def check(ok, what):
    global failed
    print(("PASS: " if ok else "FAIL: ") + what)
    failed += 0 if ok else 1


@contextlib.contextmanager
def daemon(binary):
    """A gdrstored on loopback with a local socket; its address. Ended by the PID started."""
    work = tempfile.mkdtemp(prefix="gdr-pool-")
    port_file = os.path.join(work, "port")
    log = open(os.path.join(work, "gdrstored.log"), "wb")
    proc = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--port-file", port_file, "--volume", "vol0=256MiB",
         "--volume", "rw=256MiB", "--max-op-size", "256MiB", "--local-socket",
         os.path.join(work, "local.sock"), "--log-level", "warning"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gdrstored did not start: see {log.name}")
            time.sleep(0.02)
        with open(port_file) as f:
            yield f"127.0.0.1:{int(f.read())}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


_cuda = ctypes.CDLL("libcuda.so.1")
_cuda.cuMemRetainAllocationHandle.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p]
_cuda.cuMemGetAllocationPropertiesFromHandle.argtypes = [ctypes.POINTER(_Prop), ctypes.c_uint64]
_cuda.cuMemRelease.argtypes = [ctypes.c_uint64]
_cuda.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                          ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]


def vmm_properties(ptr):
    """(POSIX fd requested, GPUDirect-RDMA capable, device) of the VMM allocation holding `ptr`;
    None when it is no VMM allocation (cuMemRetainAllocationHandle fails)."""
    handle = ctypes.c_uint64()
    if _cuda.cuMemRetainAllocationHandle(ctypes.byref(handle), ctypes.c_void_p(ptr)) != 0:
        return None
    try:
        prop = _Prop()
        r = _cuda.cuMemGetAllocationPropertiesFromHandle(ctypes.byref(prop), handle)
        if r != 0:
            raise RuntimeError(f"cuMemGetAllocationPropertiesFromHandle: CUresult {r}")
        # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR is 1
        return (bool(prop.requestedHandleTypes & 1), bool(prop.allocFlags.gpuDirectRDMACapable),
                prop.location.id)
    finally:
        _cuda.cuMemRelease(handle)


def mapped(ptr):
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    return _cuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr) == 0


def gpu_free(device):
    return torch.cuda.mem_get_info(device)[0]


def pool_tensors(c, dev):
    """The tensors' part: made in a pool, moved through the daemon, checked, then dropped with
    the pool. Returns what the release check needs: the pool's growth, the GPU's free memory
    while the pool held it, and the allocations' addresses."""
    gc.collect()
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    reserved0 = torch.cuda.memory_reserved(dev)
    pool = gt.memory_pool(dev)
    check(isinstance(pool, torch.cuda.MemPool), f"memory_pool({dev}) is a torch.cuda.MemPool")
    with torch.cuda.use_mem_pool(pool, dev):
        ts = [torch.empty(n, dtype=torch.uint8, device=dev) for n in SIZES]
        backs = [torch.empty(n, dtype=torch.uint8, device=dev) for n in SIZES]
    grew = torch.cuda.memory_reserved(dev) - reserved0
    check(grew >= 2 * sum(SIZES), f"the pool reserved {grew} bytes for tensors of {SIZES} x2")
    g = torch.Generator(device=dev).manual_seed(41)
    for i, (n, t, b) in enumerate(zip(SIZES, ts, backs)):
        what = f"{n}-byte tensor in the pool"
        props = vmm_properties(t.data_ptr())
        check(props == (True, True, dev.index),
              f"{what}: VMM memory, POSIX fd shareable, GPUDirect-RDMA capable, on its GPU "
              f"({props})")
        c.register(t)
        offset = 4097 + i * 16 * MiB
        moved = c.get("vol0", offset, into=t)
        check(moved == n and moved.path == "local/vmm-fd", f"{what}: get, path {moved.path}")
        gdrstore.verify(t, "vol0", offset)
        check(True, f"{what}: the volume's bytes are in it")
        t.copy_(torch.randint(0, 256, (n,), dtype=torch.uint8, device=dev, generator=g))
        at = (0, 16 * MiB, 128 * MiB)[i]
        put = c.put(t, "rw", at)
        got = c.get("rw", at, into=b)
        torch.cuda.synchronize(dev)
        check(put.path == got.path == "local/vmm-fd" and bool(torch.equal(t, b)),
              f"{what}: put, then got back equal into another ({put.path}, {got.path})")
    held = gpu_free(dev)
    ptrs = [t.data_ptr() for t in ts + backs]
    del t, b, ts, backs, pool
    return grew, held, ptrs


def hooks_directly(dev):
    """The C functions as PyTorch calls them: memory, its kind, a free, a second free."""
    lib = ctypes.CDLL(gt._library_path())
    alloc, free = lib.gdrstore_torch_alloc, lib.gdrstore_torch_free
    alloc.restype, alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_int,
                                                      ctypes.c_void_p]
    free.restype, free.argtypes = None, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.c_void_p]
    p = alloc(3 * MiB, dev.index, None)
    check(p is not None and vmm_properties(p) == (True, True, dev.index),
          "gdrstore_torch_alloc(3 MiB): VMM memory, fd-shareable and RDMA capable")
    free(p, 3 * MiB, dev.index, None)
    check(not mapped(p), "gdrstore_torch_free: the allocation is unmapped")
    free(p, 3 * MiB, dev.index, None)  # refused and logged (stderr); the process lives on
    check(True, "gdrstore_torch_free of what was freed already: refused, nothing harmed")
    check(alloc(1, -1, None) is None, "gdrstore_torch_alloc on device -1: NULL")
    check(alloc(1, torch.cuda.device_count(), None) is None,
          "gdrstore_torch_alloc on an ordinal past the last GPU: NULL")


def other_device_keeps_current():
    """A pool on GPU 1 used and emptied while GPU 0 is current leaves GPU 0 current."""
    if torch.cuda.device_count() < 2:
        print("SKIP: one GPU: the current device across a free on another GPU is not checked")
        return
    torch.cuda.set_device(0)
    pool = gt.memory_pool(1)
    with torch.cuda.use_mem_pool(pool, 1):
        t = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda:1")
    ptr = t.data_ptr()
    check(torch.cuda.current_device() == 0, "allocation on GPU 1: GPU 0 is still current")
    del t, pool
    gc.collect()
    torch.cuda.empty_cache()
    check(not mapped(ptr) and torch.cuda.current_device() == 0,
          "free on GPU 1 (empty_cache): unmapped, and GPU 0 is still current")


def main(gdrstored):
    dev = torch.device("cuda", 0)
    torch.cuda.init()
    with daemon(gdrstored) as address:
        c = gdrstore.Client(address, transport="local", require="local")
        # The default allocator, for contrast; this also gives the daemon its CUDA context
        # before the free memory below is measured.
        plain = torch.empty(4 * MiB, dtype=torch.uint8, device=dev)
        moved = c.get("vol0", 0, into=plain)
        check(vmm_properties(plain.data_ptr()) is None and moved.path == "local/cuda-ipc",
              f"default allocator's tensor: not VMM memory, path {moved.path}")
        del plain
        gc.collect()
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        reserved0 = torch.cuda.memory_reserved(dev)
        grew, held, ptrs = pool_tensors(c, dev)
        c.close()  # the daemon lets go of its mappings of the pool's memory
        gc.collect()
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        check(torch.cuda.memory_reserved(dev) <= reserved0,
              f"torch reserves {torch.cuda.memory_reserved(dev)} bytes again, {reserved0} "
              "before the pool")
        check(not any(mapped(p) for p in ptrs), "every allocation of the pool is unmapped")
        # The physical memory goes once the daemon, whose session ends after the close, has
        # unmapped it too: waited for, not assumed.
        deadline = time.monotonic() + 60
        while gpu_free(dev) - held < grew and time.monotonic() < deadline:
            time.sleep(0.1)
        back = gpu_free(dev) - held
        check(back >= grew, f"the GPU has the pool's {grew} bytes back (free memory +{back})")
    hooks_directly(dev)
    other_device_keeps_current()
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)
