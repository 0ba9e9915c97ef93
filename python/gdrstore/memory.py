"""What a Python object's memory is: where it lies (host or GPU), how many bytes, whether the
daemon may write into it. Nothing is copied; the object must stay alive while it is in use.

Only plain data is accepted: an element type that holds object references (numpy dtype=object,
a structured dtype with such a field, __array_interface__ / __cuda_array_interface__ typestr
'O', DLPack's opaque handles, a buffer of format 'O') is refused with ValueError naming it,
since the store's bytes written over those references crash the interpreter. Shapes, strides
and item sizes that an object reports are checked (no negative dimension, a size that fits
2^64 bytes) before any size is computed from them."""

import ctypes
import operator
import re
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class Memory:
    address: int      # host address, or CUDA device pointer when gpu
    nbytes: int
    gpu: bool
    writable: bool
    owner: Any        # keeps the object (and so its memory) alive


_MAX_BYTES = (1 << 64) - 1

# Kinds of an array-interface typestr ("<f4": byte order, kind, item size in bytes) whose items
# are plain bytes. 'O' (object references) is not; 't' (bit fields) has no byte item size.
_PLAIN_KINDS = set("biufcmMSUV")
_TYPESTR = re.compile(r"^[<>|=]([a-zA-Z])(\d+)$")


def _plain_typestr(typestr, what) -> int:
    """The item size of array-interface `typestr`; ValueError unless its items are plain data."""
    m = _TYPESTR.match(typestr) if isinstance(typestr, str) else None
    if m is None:
        raise ValueError(f"{what} has an unreadable typestr {typestr!r}")
    kind, size = m.group(1), int(m.group(2))
    if kind not in _PLAIN_KINDS or size == 0:
        raise ValueError(f"{what} has dtype {typestr!r}, which is not plain data (object "
                         "references or bit fields); only plain numeric/byte data can be "
                         "moved in place")
    return size


def _plain_descr(descr, what) -> None:
    """Refuses a structured array-interface `descr` with any field that is not plain data."""
    for field in descr or ():
        if len(field) < 2:
            continue
        if isinstance(field[1], list):
            _plain_descr(field[1], what)
        elif field[0] != "":  # ("", "|V4") is padding
            _plain_typestr(field[1], f"{what} field {field[0]!r}")


def _nbytes(shape: Iterable[int], itemsize: int, what) -> int:
    """itemsize x the product of `shape`, each dimension checked (an int >= 0) and the total
    checked against 2^64: a hostile interface cannot make the size negative or wrap it."""
    shape = tuple(shape)
    n = itemsize
    for d in shape:
        try:
            d = -1 if isinstance(d, bool) else operator.index(d)
        except TypeError:
            d = -1
        if d < 0:
            raise ValueError(f"{what} has shape {shape}: a dimension that is not a count >= 0")
        n *= d
    if n > _MAX_BYTES:
        raise ValueError(f"{what} claims {n} bytes, more than 2^64")
    return n


def _contiguous_cuda_interface(iface, obj):
    what = f"{type(obj).__name__} (__cuda_array_interface__)"
    shape = tuple(iface["shape"])
    itemsize = _plain_typestr(iface["typestr"], what)
    _plain_descr(iface.get("descr"), what)
    n = _nbytes(shape, itemsize, what)
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
# DLPack's plain type codes: int, uint, float, bfloat, complex, bool and the float8/6/4 kinds
# (7..17). 3 (kDLOpaqueHandle: pointers) is not plain data; unknown codes are refused.
_DL_PLAIN_CODES = {0, 1, 2, 4, 5, 6, *range(7, 18)}
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj) -> Memory:
    """Reads the DLTensor of obj.__dlpack__() without consuming the capsule: the capsule (kept
    in `owner`) frees it, and the producer keeps owning the memory."""
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))  # DLManagedTensor starts so
    what = f"{type(obj).__name__} (DLPack)"
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    if code not in _DL_PLAIN_CODES:
        raise ValueError(f"{what} has DLPack dtype code {code} (bits {bits}), which is not "
                         "plain data (3 is an opaque handle); only plain numeric data can be "
                         "moved in place")
    if bits * lanes == 0 or bits * lanes % 8 != 0:
        raise ValueError(f"{what} has DLPack dtype code {code} with {bits} bits x {lanes} "
                         "lanes: not a whole number of bytes per element")
    if t.ndim < 0:
        raise ValueError(f"{what} has ndim {t.ndim}")
    shape = [t.shape[i] for i in range(t.ndim)]
    n = _nbytes(shape, bits * lanes // 8, what)
    if t.strides and n != 0:
        step = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != step:
                raise ValueError(f"{type(obj).__name__} (DLPack) is not contiguous")
            step *= shape[i]
    if t.device.device_type not in (_kDLCPU, _kDLCUDA, _kDLCUDAHost):
        raise ValueError(f"DLPack device type {t.device.device_type} is neither CPU nor CUDA")
    address = (t.data or 0) + t.byte_offset
    if address > _MAX_BYTES:
        raise ValueError(f"{what} data {t.data:#x} + byte_offset {t.byte_offset} passes 2^64")
    return Memory(address, n, t.device.device_type == _kDLCUDA, True, (obj, capsule))


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
        dtype = getattr(obj, "dtype", None)
        if dtype is None or getattr(dtype, "hasobject", True):
            raise ValueError(f"array of dtype {dtype} holds object references, not plain data; "
                             "the store's bytes would overwrite them")
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
        if "O" in re.sub(r":[^:]*:", "", view.format):  # field names (":name:") aside
            raise ValueError(f"memoryview of format {view.format!r} holds object references, "
                             "not plain data")
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
