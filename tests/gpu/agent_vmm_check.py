"""GPU memory made with CUDA's VMM API (cuMemCreate, shareable as a POSIX fd: what a process
makes when it must hand memory over without a shared IPC namespace) through gdragent. The
client library hands the agent the allocation's descriptor; the agent moves the bytes upstream
(over tcp through the staging ring; over local by handing the same descriptor on to the
daemon). A get is checked against the volume's pattern, a put by reading it back into a second
allocation, and each op's path against PATH.

Usage: agent_vmm_check.py AGENT_SOCKET PATH. Prints PASS/FAIL lines; exits non-zero when a check
failed."""

import ctypes
import sys

import cupy
import gdrstore

MiB = 1 << 20
failed = 0


def check(ok, what):
    global failed
    print(("PASS: " if ok else "FAIL: ") + what)
    failed += 0 if ok else 1


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


def vmm_array(nbytes):
    """A CuPy uint8 array over a VMM allocation of GPU 0 made shareable as a POSIX fd."""
    cuda = ctypes.CDLL("libcuda.so.1")
    cupy.cuda.Device(0).use()
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))  # the primary context, current

    def ok(r, what):
        if r != 0:
            raise RuntimeError(f"{what}: CUresult {r}")

    prop = _Prop()
    prop.type = 1                  # CU_MEM_ALLOCATION_TYPE_PINNED
    prop.requestedHandleTypes = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    prop.location = _Location(1, 0)  # CU_MEM_LOCATION_TYPE_DEVICE, GPU 0
    prop.allocFlags.gpuDirectRDMACapable = 1
    gran = ctypes.c_size_t()
    ok(cuda.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0), "granularity")
    size = (nbytes + gran.value - 1) // gran.value * gran.value
    handle = ctypes.c_uint64()
    ok(cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop),
                        ctypes.c_uint64(0)), "cuMemCreate")
    va = ctypes.c_uint64()
    ok(cuda.cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(size),
                                ctypes.c_size_t(gran.value), ctypes.c_uint64(0),
                                ctypes.c_uint64(0)), "cuMemAddressReserve")
    ok(cuda.cuMemMap(va, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_uint64(0)),
       "cuMemMap")
    access = _Access(_Location(1, 0), 3)  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    ok(cuda.cuMemSetAccess(va, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)),
       "cuMemSetAccess")
    mem = cupy.cuda.UnownedMemory(va.value, size, owner=None)
    return cupy.ndarray((nbytes,), dtype=cupy.uint8, memptr=cupy.cuda.MemoryPointer(mem, 0))


def main(socket, want):
    c = gdrstore.Client(agent=socket, require="agent,vmm-fd")
    a = vmm_array(16 * MiB)
    moved = c.get("vol0", 8192, into=a)
    check(moved == a.size and moved.path == want,
          f"VMM memory through the agent: get 16 MiB, path {moved.path} (want {want})")
    gdrstore.verify(a, "vol0", 8192)
    check(True, "VMM memory through the agent: the volume's bytes are in it")
    a[:] = cupy.arange(a.size, dtype=cupy.uint32).astype(cupy.uint8) ^ 0x5A
    put = c.put(a, "rw", 64 * MiB)
    b = vmm_array(16 * MiB)
    c.get("rw", 64 * MiB, into=b)
    check(put.path == want and bool((a == b).all()),
          "VMM memory through the agent: put, then got back into another allocation")
    c.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
