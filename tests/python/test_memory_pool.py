"""gdrstore.torch.memory_pool where it cannot be made (no GPU here): the refusal names each thing
missing (this torch's lack of torch.cuda.MemPool, CUDA), a device that is not a CUDA one is
refused naming it, and the library torch would load by path is the one loaded, with the hooks
in it answering as they must without a driver. tests/gpu/memory_pool_check.py makes the pool
and moves tensors in it on the GPU host."""

import ctypes
import os

import pytest

torch = pytest.importorskip("torch", reason="torch (Debian's python3-torch) is not installed")

import gdrstore  # noqa: E402
import gdrstore.torch as gt  # noqa: E402
from gdrstore import _native  # noqa: E402


def _driver_loads():
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def test_the_pool_is_refused_here_naming_what_is_missing():
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here: tests/gpu/memory_pool_check.py makes the pool")
    for device in ("cuda:0", "cuda", 0, None, torch.device("cuda", 0)):
        with pytest.raises(gdrstore.FailedPrecondition) as e:
            gt.memory_pool(device)
        message = str(e.value)
        assert message.startswith("gdrstore.torch.memory_pool needs "), message
        assert "torch.cuda.is_available() is False" in message, message
        lacks = f"which torch {torch.__version__} lacks"
        assert (lacks in message) == (not hasattr(torch.cuda, "MemPool")), message


@pytest.mark.parametrize("device,error,text", [
    ("cpu", gdrstore.InvalidArgument, "device 'cpu' is not a CUDA device"),
    (torch.device("cpu"), gdrstore.InvalidArgument, "is not a CUDA device"),
    ("cuda:x", gdrstore.InvalidArgument, "device 'cuda:x' is not a device torch knows"),
    (-1, gdrstore.InvalidArgument, "device -1 is not a CUDA ordinal"),
    (1.0, TypeError, "not float"),
    (True, TypeError, "not bool"),
    (b"cuda:0", TypeError, "not bytes"),
])
def test_a_device_that_is_not_a_cuda_one_is_refused_before_anything_else(device, error, text):
    with pytest.raises(error) as e:
        gt.memory_pool(device)
    assert text in str(e.value)


def test_the_library_torch_loads_by_path_is_the_loaded_one_with_the_hooks():
    path = gt._library_path()
    assert os.path.isabs(path) and os.path.basename(path).startswith("libgdrclient.so"), path
    if os.environ.get("GDRSTORE_LIBRARY"):
        assert os.path.samefile(path, os.environ["GDRSTORE_LIBRARY"])
    # What torch.cuda.memory.CUDAPluggableAllocator does with the path: the loader hands back
    # the library already loaded (so the allocation table is the one libgdrclient keeps).
    again = ctypes.CDLL(path)
    fn = ctypes.cast(again.gdrstore_abi_version, ctypes.c_void_p).value
    assert fn == ctypes.cast(_native.lib._cdll.gdrstore_abi_version, ctypes.c_void_p).value
    alloc, free = again.gdrstore_torch_alloc, again.gdrstore_torch_free
    alloc.restype, alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_int,
                                                      ctypes.c_void_p]
    free.restype, free.argtypes = None, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.c_void_p]
    assert alloc(0, 0, None) is None
    free(None, 0, 0, None)
    free(0x7f0000401000, 4096, 0, None)  # never handed out: logged and left alone
    if _driver_loads():
        return  # the rest is what a host without a driver answers
    assert alloc(1 << 21, 0, None) is None
