"""What Client and Cluster share: one set of calls (get/put with `at`, stream, allocate,
register, volumes, close) over a library handle, so that code written for a store runs on
either. Each subclass names its handle's C functions; the checks and the registration cache
live here once."""

import ctypes
import threading
from typing import Any, Dict, List, Optional, Tuple

from . import errors
from ._native import checked_int, lib
from .memory import Memory, describe
from .registrations import Registration, RegistrationCache


def check(status: int, handle) -> None:
    """Raises the package's exception for a failed call on `handle`. The library keeps failure
    messages per thread, so this runs on the calling thread right after the call."""
    if status != 0:
        raise errors.from_status(status, lib.gdrstore_error(handle).decode(errors="replace"))


class Releaser:
    """Releases a registration when the object holding it is collected."""

    def __init__(self, reg: Registration):
        self._reg = reg

    def __del__(self):
        try:
            self._reg.release()
        except Exception:
            pass


class Moved(int):
    """The bytes an op moved (an int, as before), with the path they took: `path`, e.g.
    "tcp/host", "local/cuda-ipc", "agent/vmm-fd>rc:mlx5_0/dma-buf" (docs/python.md "Paths");
    "" where the library does not name it (a Cluster's ops)."""

    path: str

    def __new__(cls, n: int, path: str):
        obj = super().__new__(cls, n)
        obj.path = path
        return obj


class Outcome:
    """What a stream op's future offers besides result(timeout), which each kind defines."""

    def result(self, timeout: Optional[float] = None) -> Moved:
        raise NotImplementedError

    def exception(self, timeout: Optional[float] = None) -> Optional[errors.Error]:
        """The op's error, or None when it succeeded (waiting up to `timeout` for it)."""
        try:
            self.result(timeout)
        except errors.Error as e:
            return e
        return None


class Store:
    """The calls Client and Cluster both offer, with the same arguments. A subclass sets the
    names of its handle's C functions and calls _start() once its handle is open."""

    _kind = "store"          # "Client" / "Cluster", in messages
    _register_host = ""      # gdrstore_*register_host
    _register_gpu = ""       # gdrstore_*register_gpu
    _alloc_host = ""         # gdrstore_*alloc_host
    _release = ""            # gdrstore_*buffer_release

    _handle = None

    def _start(self, handle) -> None:
        """Takes `handle` (open) as the store's. Streams are listed from here on."""
        # Streams not closed yet, which close() ends first; None once closing has begun.
        self._streams_lock = threading.Lock()
        self._streams: Optional[Dict[int, Any]] = {}
        self._handle = handle
        # Registrations kept while their object lives (objects that take weak references).
        self._regs = RegistrationCache(self._register_memory)

    def _open_handle(self):
        """The library handle, or gdrstore.FailedPrecondition once the store is closed."""
        handle = self._handle
        if handle is None:
            raise errors.FailedPrecondition(f"the {self._kind} is closed")
        return handle

    def close(self) -> None:  # each kind ends its handle its own way
        raise NotImplementedError

    def _take_streams(self) -> Optional[List[Any]]:
        """The streams still open, for close() to end; None when closing began already (or
        the handle never opened)."""
        if self._handle is None:
            return None
        with self._streams_lock:
            streams, self._streams = self._streams, None
        return None if streams is None else list(streams.values())

    def _end_streams(self) -> bool:
        """close()'s first half: ends the streams still open (each waits for its ops) and
        releases every registration. False when closing began already (or never opened)."""
        streams = self._take_streams()
        if streams is None:
            return False
        what = type(self).__name__
        for stream in streams:
            try:
                stream._end(True, f"the stream was closed by its {what}'s close()")
            except Exception:  # its ops' outcomes are on their Futures; the store still closes
                pass
        self._regs.close()
        return True

    def _adopt(self, stream) -> bool:
        """Lists `stream` for close(); False when the store is closing."""
        with self._streams_lock:
            if self._streams is None:
                return False
            self._streams[id(stream)] = stream
            return True

    def _forget(self, stream) -> None:
        with self._streams_lock:
            if self._streams is not None:
                self._streams.pop(id(stream), None)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        errors.close_after(self.close, exc)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- memory ----
    def _register_memory(self, mem: Memory) -> Registration:
        if mem.nbytes == 0:
            raise ValueError("buffer is empty")
        handle = self._open_handle()
        out = ctypes.c_void_p()
        fn = getattr(lib, self._register_gpu if mem.gpu else self._register_host)
        check(fn(handle, mem.address, mem.nbytes, ctypes.byref(out)), handle)
        return Registration(out, mem.nbytes, getattr(lib, self._release))

    def _host_address(self, buffer) -> int:
        """Where the host memory of an allocated buffer lies."""
        raise NotImplementedError

    def allocate(self, nbytes: int) -> memoryview:
        """`nbytes` of zeroed host memory the library allocates and registers (a Client's is a
        memfd, which transport local and the node agent map without a copy): a writable
        memoryview (format 'B') to fill in place, wrap (numpy.frombuffer, torch.frombuffer)
        and pass to get/put. The memory stays registered, and mapped, while the view or
        anything made from it lives."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int):
            raise TypeError(f"nbytes must be an int, not {type(nbytes).__name__}")
        if not 0 < nbytes < (1 << 63):
            raise errors.ArgumentOutOfRange(f"nbytes {nbytes} is outside [1, 2^63)")
        handle = self._open_handle()
        out = ctypes.c_void_p()
        check(getattr(lib, self._alloc_host)(handle, nbytes, ctypes.byref(out)), handle)
        reg = Registration(out, nbytes, getattr(lib, self._release))
        array = (ctypes.c_ubyte * nbytes).from_address(self._host_address(out))
        # The array's life holds the registration (and so the mapping): every view of it
        # keeps the array alive.
        array._gdrstore_registration = Releaser(reg)
        return memoryview(array).cast("B")

    def register(self, obj) -> None:
        """Registers `obj` now (and keeps it registered while `obj` lives), so that ops on it
        and on any slice of it skip registration."""
        self._regs.acquire(describe(obj))

    def registration_handles(self) -> int:
        """Registrations kept alive for live objects (for tests and diagnosis)."""
        return len(self._regs)

    def _span(self, mem: Memory, length: Optional[int],
              at: int = 0) -> Tuple[Registration, bool, int]:
        """The registration of `mem`, whether the caller releases it after the op, and the
        op's length (_length's). Checked before anything is registered."""
        n = self._length(mem, length, at)
        reg, temporary = self._regs.acquire(mem)
        return reg, temporary, n

    @staticmethod
    def _length(mem: Memory, length: Optional[int], at: int = 0) -> int:
        """The op's length: `length` or the rest of the buffer from `at`, each checked."""
        # A Memory made by hand: what registering it would refuse, before `at` is read.
        checked_int("address", mem.address, ctypes.c_void_p)
        checked_int("nbytes", mem.nbytes, ctypes.c_size_t)
        if isinstance(at, bool) or not isinstance(at, int):
            raise TypeError(f"at must be an int, not {type(at).__name__}")
        if not 0 <= at <= mem.nbytes:
            raise errors.ArgumentOutOfRange(f"at {at} is outside the {mem.nbytes}-byte buffer")
        n = mem.nbytes - at if length is None else checked_int("length", length,
                                                                ctypes.c_uint64)
        if n > mem.nbytes - at:
            raise errors.ArgumentOutOfRange(f"at {at} + length {n} is past the end of the "
                                            f"{mem.nbytes}-byte buffer")
        return n

    # ---- volumes ----
    def info(self, volume: Optional[str] = None) -> Dict[str, Any]:
        raise NotImplementedError

    def volumes(self, name: Optional[str] = None) -> List[Dict[str, Any]]:
        """The volumes the store serves (only `name`, when given: [] when it has none of that
        name), each a dict with at least "name" and "size" (bytes, an int) besides what the
        kind reports (a daemon's VolumeInfo, a cluster's layout)."""
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        out = []
        for v in self.info(name).get("volumes", []):
            if name is None or v.get("name") == name:
                out.append(dict(v, size=int(v.get("size", 0))))
        return out
