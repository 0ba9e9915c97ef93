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


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_kDLCPU, _kDLCUDA, _kDLCUDAHost = 1, 2, 3
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj) -> Memory:
    """Reads the DLTensor of obj.__dlpack__() without consuming the capsule: the capsule (kept
    in `owner`) frees it, and the producer keeps owning the memory."""
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))  # DLManagedTensor starts so
    itemsize = t.dtype.bits * t.dtype.lanes // 8
    shape = [t.shape[i] for i in range(t.ndim)]
    n = itemsize
    for d in shape:
        n *= d
    if t.strides and n != 0:
        step = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != step:
                raise ValueError(f"{type(obj).__name__} (DLPack) is not contiguous")
            step *= shape[i]
    if t.device.device_type not in (_kDLCPU, _kDLCUDA, _kDLCUDAHost):
        raise ValueError(f"DLPack device type {t.device.device_type} is neither CPU nor CUDA")
    return Memory((t.data or 0) + t.byte_offset, n, t.device.device_type == _kDLCUDA, True,
                  (obj, capsule))


def describe(obj) -> Memory:
    """The memory of `obj`: a torch tensor (CPU or CUDA), a numpy array, anything with
    __cuda_array_interface__ (CuPy, Numba) or __dlpack__ (JAX, ...), a bytearray, bytes or
    memoryview, or a Memory.
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
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj)
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
