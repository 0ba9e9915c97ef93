"""Registrations of a caller's memory, kept while the object owning that memory lives: the same
object again reuses its registration, and when the object dies its registration is released
(which waits for the ops on it). Client and Cluster each keep one RegistrationCache."""

import threading
import weakref
from typing import Callable, Dict, Tuple

from .memory import Memory


class Registration:
    """One library handle over registered memory. It holds no reference to the object whose
    memory it views: a cached one is released when that object dies."""

    def __init__(self, handle, nbytes: int, release: Callable[[object], None]):
        self.handle = handle
        self.nbytes = nbytes
        self._release = release
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._release(self.handle)


class RegistrationCache:
    """register(mem) makes a Registration; acquire() hands out cached ones. close() releases
    every cached registration; the library handle they belong to may be closed after it."""

    def __init__(self, register: Callable[[Memory], Registration]):
        self._register = register
        self._lock = threading.Lock()
        self._regs: Dict[Tuple[int, int, bool], Registration] = {}
        self._closed = False

    def acquire(self, mem: Memory) -> Tuple[Registration, bool]:
        """The registration for `mem` and whether the caller must release it after the op
        (objects without weak references, or a race with another thread's registration)."""
        key = (mem.address, mem.nbytes, mem.gpu)
        with self._lock:
            reg = self._regs.get(key)
            if reg is not None and not reg.released:
                return reg, False
        reg = self._register(mem)
        owner = mem.owner[0] if isinstance(mem.owner, tuple) else mem.owner
        with self._lock:
            taken = self._regs.get(key)
            if self._closed or (taken is not None and not taken.released):
                return reg, True
            self._regs[key] = reg
        try:
            weakref.finalize(owner, self._forget, key, reg)
        except TypeError:  # no weak references: registered for this op only
            with self._lock:
                if self._regs.get(key) is reg:
                    del self._regs[key]
            return reg, True
        return reg, False

    def _forget(self, key, reg: Registration) -> None:
        with self._lock:
            if self._regs.get(key) is reg:
                del self._regs[key]
            closed = self._closed
        if not closed:  # after close, close() has released it
            reg.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            regs, self._regs = list(self._regs.values()), {}
        for r in regs:
            r.release()

    def __len__(self) -> int:
        with self._lock:
            return len(self._regs)
