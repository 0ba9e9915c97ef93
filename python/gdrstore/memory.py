"""What a Python object's memory is: where it lies (host or GPU), how many bytes, whether the
daemon may write into it. Nothing is copied; the object must stay alive while it is in use."""

import ctypes
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Memory:
    address: int      # host address, or CUDA device pointer when gpu
    nbytes: int
    gpu: bool
    writable: bool
    owner: Any        # keeps the object (and so its memory) alive


def _contiguous_cuda_interface(iface, obj):
    shape = iface["shape"]
    itemsize = int(iface["typestr"][2:])
    n = itemsize
    for d in shape:
        n *= d
    strides = iface.get("strides")
    if strides is not None:
        expected, step = [], itemsize
        for d in reversed(shape):
            expected.append(step)
            step *= d
        if tuple(reversed(expected)) != tuple(strides) and n != 0:
            raise ValueError(f"{type(obj).__name__} is not contiguous (strides {strides}); "
                             "pass a contiguous copy")
    ptr, readonly = iface["data"]
    return Memory(ptr, n, True, not readonly, obj)


def describe(obj) -> Memory:
    """The memory of `obj`: a torch tensor (CPU or CUDA), a numpy array, anything with
    __cuda_array_interface__ (CuPy, Numba), a bytearray, bytes or memoryview, or a Memory.
    ValueError for a non-contiguous object or one whose memory cannot be reached in place."""
    if isinstance(obj, Memory):
        return obj
    mod = type(obj).__module__
    if mod.startswith("torch") and hasattr(obj, "data_ptr"):
        if not obj.is_contiguous():
            raise ValueError("tensor is not contiguous; pass tensor.contiguous()")
        nbytes = obj.numel() * obj.element_size()
        return Memory(obj.data_ptr(), nbytes, obj.device.type == "cuda", True, obj)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _contiguous_cuda_interface(iface, obj)
    if hasattr(obj, "__array_interface__") and hasattr(obj, "flags"):  # numpy
        if not obj.flags["C_CONTIGUOUS"]:
            raise ValueError("array is not C-contiguous; pass numpy.ascontiguousarray(array)")
        return Memory(obj.ctypes.data, obj.nbytes, False, bool(obj.flags["WRITEABLE"]), obj)
    if isinstance(obj, bytes):
        address = ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0
        return Memory(address, len(obj), False, False, obj)
    if isinstance(obj, (bytearray, memoryview)):
        view = memoryview(obj)
        if not view.contiguous:
            raise ValueError("memoryview is not contiguous")
        if view.readonly:
            raise ValueError("read-only memoryview: pass the bytes object itself, or a writable "
                             "buffer")
        if view.nbytes == 0:
            return Memory(0, 0, False, True, obj)
        arr = (ctypes.c_char * view.nbytes).from_buffer(view)
        return Memory(ctypes.addressof(arr), view.nbytes, False, True, (obj, view, arr))
    raise ValueError(f"cannot reach the memory of a {type(obj).__name__} in place (pass a torch "
                     "tensor, a numpy or CuPy array, a bytearray or a memoryview)")
