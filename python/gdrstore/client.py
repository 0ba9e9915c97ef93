"""Client, Stream and Future over the C ABI. Verbs are the caller's: get moves store bytes into
the caller's memory (the wire's Write RPC), put moves the caller's bytes into the store (the
wire's Read RPC)."""

import ctypes
import json
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import errors
from ._native import BufferInfo, Completion, Result, client_options, lib, open_handle
from .memory import Memory, describe
from .registrations import Registration
from .store import Moved, Outcome, Store, check as _check


def _failure(status: int, handle) -> errors.Error:
    """The exception for a call on `handle` that returned `status`. The library keeps failure
    messages per thread, so this must run on the calling thread right after the call: then it
    is that call's message whatever other threads do on the same handle."""
    return errors.from_status(status, lib.gdrstore_error(handle).decode(errors="replace"))


_POLL_MAX_MS = (1 << 31) - 1  # gdrstore_poll's int


def _poll_ms(timeout: Optional[float]) -> int:
    """A wait of `timeout` seconds as gdrstore_poll's timeout_ms (-1: no limit). A wait longer
    than an int of milliseconds (24.8 days) waits that long; the caller's loop waits again."""
    if timeout is None:
        return -1
    if timeout != timeout:
        raise ValueError("timeout is NaN")
    return int(min(max(0.0, timeout) * 1000, _POLL_MAX_MS))


class Client(Store):
    """A connection to one gdrstored: `Client("127.0.0.1:50051", transport="auto")`, or
    `gdrstore.connect("127.0.0.1:50051")`. Its calls are a Cluster's too (gdrstore.store.Store):
    code written for one runs on the other.

    Left out, address, agent and the token come from the environment, as a pod's spec passes
    them: GDRSTORE_ADDRESS (the daemon's HOST:PORT; else 127.0.0.1:50051), GDRSTORE_AGENT (the
    node agent's socket, which wins over an address) and GDRSTORE_TOKEN_FILE. An argument
    given wins over its variable (agent="": the daemon directly, whatever GDRSTORE_AGENT
    says); a malformed variable raises gdrstore.InvalidArgument naming it.

    transport: "tcp", "rc", "dc", "local" (a daemon on this host: memory handed over through its
    Unix socket, no copy) or "auto". agent: the node agent's socket path
    (`Client(agent="/run/gdragent/agent.sock")`): every call goes through gdragent, which
    reaches the daemons itself (address, transport, token and TLS are then its own); memory is
    handed to it without copies, so host memory must come from `allocate` (a tensor or array of
    your own is refused, naming it). local_socket: transport local's socket when not the path the
    daemon names. token / token_file: the bearer token a daemon
    started with --token-file expects. timeout: seconds per op (None: no deadline).
    tls_ca: PEM file of the CA the daemon's certificate must chain to (TLS on; daemons with
    --tls-cert). tls_cert / tls_key: this client's certificate and key (daemons with
    --tls-client-ca). tls_server_name: the name to verify instead of the address's host.
    crc32c: ask the daemon for the CRC32C of every op's bytes and check it against the memory
    (a mismatch raises gdrstore.DataLoss naming both values).
    fail_when_full: an op the daemon would not admit yet (its in-flight limits, as GetInfo
    states them) raises gdrstore.ResourceExhausted at once, instead of waiting (within its
    timeout) until answers free room.
    require: terms every op's path must meet instead of falling back ("local", "rc,dma-buf",
    "agent"; docs/python.md "Paths"): a transport, agent or GPU registration that rules one out
    raises gdrstore.FailedPrecondition naming why. get/put return the bytes moved as a `Moved`
    (an int) whose `path` names the way they went.
    stream_calls: gRPC calls each Stream spreads its ops over, 1..64 (None: the library's, 4);
    one call bounds a lone Stream's small ops, more cost CPU where many processes share a
    host's cores (there, 1). Out of range raises gdrstore.InvalidArgument naming it.

    Integers (offsets, lengths) are checked against what the C ABI carries: out of range raises
    gdrstore.ArgumentOutOfRange (an InvalidArgument and an OverflowError) naming the argument;
    a bool or float where an int goes, TypeError. Objects whose elements are not plain data
    (numpy dtype=object) are refused with ValueError naming the dtype. Thread-safe: every
    exception carries the message of the op that failed."""

    def __init__(self, address: Optional[str] = None, transport: str = "tcp",
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 rdma_device: Optional[str] = None, timeout: Optional[float] = 120.0,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, tls_server_name: Optional[str] = None,
                 crc32c: bool = False, fail_when_full: bool = False,
                 agent: Optional[str] = None, local_socket: Optional[str] = None,
                 require: Optional[str] = None, stream_calls: Optional[int] = None):
        opts, self._keep = client_options(
            address=address, transport=transport, token=token, token_file=token_file,
            rdma_device=rdma_device, timeout=timeout, tls_ca=tls_ca, tls_cert=tls_cert,
            tls_key=tls_key, tls_server_name=tls_server_name, crc32c=crc32c,
            fail_when_full=fail_when_full, agent=agent, local_socket=local_socket,
            require=require, stream_calls=stream_calls)
        self._start(open_handle(lib.gdrstore_client_open, opts))

    _kind = "Client"
    _register_host, _register_gpu = "gdrstore_register_host", "gdrstore_register_gpu"
    _alloc_host, _release = "gdrstore_alloc_host", "gdrstore_buffer_release"

    # ---- lifetime ----
    def close(self) -> None:
        """Closes the Streams still open (each waits for its ops: their Futures hold the
        outcomes), releases every registration (waiting for their ops) and closes the connection.
        Afterwards every call on the Client or its Streams raises gdrstore.FailedPrecondition;
        memory from allocate() stays usable while referenced. Closing again does nothing."""
        if not self._end_streams():
            return  # closed (or closing) already, or never opened
        handle, self._handle = self._handle, None
        lib.gdrstore_client_close(handle)

    def _host_address(self, buffer) -> int:
        info = BufferInfo()
        lib.gdrstore_buffer_get_info(buffer, ctypes.byref(info))
        return info.host

    # ---- ops ----
    def get(self, volume: str, offset: int, into, length: Optional[int] = None,
            at: int = 0) -> Moved:
        """Store -> `into` (volume bytes [offset, offset + length), length defaulting to the
        rest of `into`), in place, from byte `at` of `into` on (ops at many places of one
        buffer share its registration; a slice per op registers each slice). Returns the bytes
        moved."""
        mem = describe(into)
        if not mem.writable:
            raise ValueError("`into` is read-only; a get needs writable memory")
        handle = self._open_handle()
        reg, temporary, n = self._span(mem, length, at)
        try:
            result = Result()
            _check(lib.gdrstore_get(handle, volume, offset, n, reg.handle, at,
                                    ctypes.byref(result)), handle)
            return Moved(result.bytes, _last_path(handle))
        finally:
            if temporary:
                reg.release()

    def put(self, src, volume: str, offset: int, length: Optional[int] = None,
            sync: bool = False, at: int = 0) -> Moved:
        """`src` (from its byte `at` on) -> store at volume [offset, offset + length). sync:
        answered only once a file-backed volume has the bytes on disk. Returns the bytes
        moved."""
        handle = self._open_handle()
        reg, temporary, n = self._span(describe(src), length, at)
        try:
            result = Result()
            _check(lib.gdrstore_put(handle, reg.handle, at, volume, offset, n,
                                    1 if sync else 0, ctypes.byref(result)), handle)
            return Moved(result.bytes, _last_path(handle))
        finally:
            if temporary:
                reg.release()

    def stream(self) -> "Stream":
        """Many ops over one Stream call; use as a context manager."""
        return Stream(self)

    def info(self, volume: Optional[str] = None) -> Dict[str, Any]:
        """The daemon's GetInfo as a dict (proto field names), with every volume (the daemon's
        pages joined). ``volume``: "volumes" holds that one alone, or none when the daemon shows
        no volume of the name; one small answer however many volumes it serves."""
        if volume is None:
            return self._json(lib.gdrstore_info_json)
        return self._json(lambda handle, out: lib.gdrstore_volume_info_json(handle, volume, out))

    def create_volume(self, name: str, size: int, file: bool = False,
                      media: Optional[str] = None, repeat: Optional[int] = None) -> bool:
        """Makes a volume on the daemon (its Admin service; an admin token when it has a token
        file): memory-backed, or with ``file=True`` a file in its writable ``--volume-dir``.
        ``media`` as ``--volume``'s media options ("media=nvme-gen4,latency_us=80").
        ``repeat`` (bytes; memory volumes): ``--volume``'s repeat=, the volume backed by that
        much of the daemon's memory and seen again every ``repeat`` bytes, so ``size`` may be
        past the daemon's memory (verify with the same ``repeat``). Returns True when a file
        was made now, False when an existing file of the size is served (and for memory
        volumes)."""
        options = media
        if repeat is not None:
            # Carried with the media options, as --volume's options after NAME=SIZE.
            options = ",".join(filter(None, (media, f"repeat={_check_repeat(repeat)}")))
        handle = self._open_handle()
        created = ctypes.c_int(0)
        _check(lib.gdrstore_volume_create(handle, name, size, int(file), options,
                                          ctypes.byref(created)), handle)
        return bool(created.value)

    def delete_volume(self, name: str, delete_file: bool = False) -> None:
        """Takes a volume away (ops in flight on it finish); ``delete_file`` also removes its
        file (files in the daemon's writable ``--volume-dir`` only)."""
        handle = self._open_handle()
        _check(lib.gdrstore_volume_delete(handle, name, int(delete_file)), handle)

    def stats(self) -> Dict[str, Any]:
        """The daemon's GetStats as a dict (proto field names)."""
        return self._json(lib.gdrstore_stats_json)

    def _json(self, fn) -> Dict[str, Any]:
        handle = self._open_handle()
        p = ctypes.c_void_p()
        _check(fn(handle, ctypes.byref(p)), handle)
        try:
            return json.loads(ctypes.string_at(p).decode())
        finally:
            lib.gdrstore_free(p)


def _last_path(handle) -> str:
    # Read on the calling thread right after its op, as the library keeps it per thread.
    return (lib.gdrstore_last_path(handle) or b"").decode(errors="replace")


class Future(Outcome):
    """The outcome of one stream op: result() returns the bytes moved (a Moved, which names
    the path) or raises. latency: seconds from its submission until its answer was taken from
    the stream (by any wait on it); service_s: the daemon's own time on it."""

    def __init__(self, stream: "Stream", tag: int):
        self._stream, self._tag = stream, tag
        self._done = False
        self._bytes = Moved(0, "")
        self._error: Optional[errors.Error] = None
        self._submitted = time.monotonic()
        self.latency: Optional[float] = None
        self.service_s: Optional[float] = None

    def _resolve(self, c: Completion) -> None:
        self.latency = time.monotonic() - self._submitted
        self.service_s = c.service_ns / 1e9
        if c.status == 0:
            # On success the completion's message is the path the op took.
            self._bytes = Moved(c.bytes, c.message.decode(errors="replace"))
        else:
            self._error = errors.from_status(c.status, c.message.decode(errors="replace"))
        self._done = True

    def _fail(self, error: errors.Error) -> None:
        """Resolves the Future with `error`: its stream closed before its answer was taken."""
        self.latency = time.monotonic() - self._submitted
        self._error = error
        self._done = True

    def done(self) -> bool:
        return self._done

    def result(self, timeout: Optional[float] = None) -> "Moved":
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._done:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError("stream op not answered in time")
            self._stream._collect(left)
        if self._error is not None:
            raise self._error
        return self._bytes


class Stream:
    """Ops submitted at once and answered in any order: get/put return Futures.

    Closed by close() (or the with block), or by its Client's close(), in either order: every
    Future is resolved then, get/put raise gdrstore.FailedPrecondition, and closing again does
    nothing. The Stream keeps its Client (and a Future its Stream) alive."""

    def __init__(self, client: Client):
        self._client = client
        self._lock = threading.Lock()
        self._next = 1
        # Each op in flight keeps its object (so its memory) alive until it is answered.
        self._pending: Dict[int, Tuple[Future, Registration, bool, Memory]] = {}
        # Why get/put are refused (set once closing has begun), and when the close is over.
        self._closed: Optional[str] = None
        self._ended = threading.Event()
        self._batches = threading.local()  # each polling thread's own completion array
        self._handle = None
        client_handle = client._open_handle()
        handle = ctypes.c_void_p()
        _check(lib.gdrstore_stream_open(client_handle, ctypes.byref(handle)), client_handle)
        self._handle = handle
        if not client._adopt(self):  # the Client began to close meanwhile
            self._end(False, "the stream was closed by its Client's close()")
            raise errors.FailedPrecondition("the Client is closed")

    def _submit(self, fn, obj, length, writable_needed, args_before, args_after,
                at: int = 0) -> Future:
        if self._closed is not None:
            raise errors.FailedPrecondition(self._closed)
        mem = describe(obj)
        if writable_needed and not mem.writable:
            raise ValueError("`into` is read-only; a get needs writable memory")
        reg, temporary, n = self._client._span(mem, length, at)
        with self._lock:
            closed, handle = self._closed, self._handle
            if closed is None:
                tag = self._next
                self._next += 1
                fut = Future(self, tag)
                self._pending[tag] = (fut, reg, temporary, mem)
        if closed is not None:  # closed while the memory was registered
            if temporary:
                reg.release()
            raise errors.FailedPrecondition(closed)
        try:
            status = fn(handle, *args_before(reg, n), *args_after(tag))
            failure = _failure(status, handle) if status != 0 else None
        except Exception as e:  # an argument refused before the call
            status, failure = -1, e
        if failure is not None:
            with self._lock:
                taken = self._pending.pop(tag, None)
            if temporary and taken is not None:
                reg.release()
            raise failure
        return fut

    def get(self, volume: str, offset: int, into, length: Optional[int] = None,
            at: int = 0) -> Future:
        """Store -> `into` (from its byte `at` on), as Client.get; the Future resolves to the
        bytes moved."""
        return self._submit(lib.gdrstore_stream_get, into, length, True,
                            lambda reg, n: (volume, offset, n, reg.handle, at),
                            lambda tag: (tag,), at)

    def put(self, src, volume: str, offset: int, length: Optional[int] = None,
            at: int = 0) -> Future:
        """`src` (from its byte `at` on) -> store, as Client.put; the Future resolves to the
        bytes moved."""
        return self._submit(lib.gdrstore_stream_put, src, length, False,
                            lambda reg, n: (reg.handle, at, volume, offset, n),
                            lambda tag: (tag,), at)

    def _collect(self, timeout: Optional[float]) -> None:
        handle = self._handle
        if handle is None:
            # Closed, or closing: the close resolves every Future still pending.
            self._ended.wait(timeout)
            return
        batch = getattr(self._batches, "array", None)
        if batch is None:
            batch = self._batches.array = (Completion * 64)()
        got = ctypes.c_size_t()
        status = lib.gdrstore_poll(handle, batch, len(batch), _poll_ms(timeout),
                                   ctypes.byref(got))
        if status != 0:
            if self._handle is None:  # released by a close meanwhile
                return
            raise _failure(status, handle)
        for i in range(got.value):
            c = batch[i]
            with self._lock:
                taken = self._pending.pop(c.tag, None)
            if taken is None:
                continue
            fut, reg, temporary, _ = taken
            fut._resolve(c)
            if temporary:
                reg.release()

    def wait_all(self, timeout: Optional[float] = None) -> List[Future]:
        """Waits until every op submitted so far is answered; returns their Futures."""
        with self._lock:
            futures = [f for f, _, _, _ in self._pending.values()]
        for f in futures:
            f.exception(timeout)
        return futures

    def close(self) -> None:
        """Waits for every op, then ends the call; raises the call's error if it failed. Does
        nothing when the Stream is closed already (by close() or its Client's close())."""
        failure = self._end(True, "the stream is closed")
        if failure is not None:  # the message stays readable on this thread after the close
            raise failure

    def _end(self, wait: bool, why: str) -> Optional[errors.Error]:
        """Ends the Stream once: from here get/put raise FailedPrecondition(`why`); with
        `wait`, every answer is collected first; then the library handle is released and any
        Future still pending fails. The call's error, or None (also when closing began
        elsewhere: this waits for that close to finish)."""
        with self._lock:
            first = self._closed is None
            if first:
                self._closed = why
        if not first:
            self._ended.wait()
            return None
        failure = None
        try:
            if wait:
                self.wait_all()
        finally:
            handle, self._handle = self._handle, None
            if handle is not None:
                status = lib.gdrstore_stream_close(handle)
                failure = _failure(status, handle) if status != 0 else None
            with self._lock:
                left, self._pending = list(self._pending.values()), {}
            for fut, reg, temporary, _ in left:
                fut._fail(errors.Cancelled("the stream was closed before the op's answer "
                                           "was collected"))
                if temporary:
                    reg.release()
            self._ended.set()
            self._client._forget(self)
        return failure

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        errors.close_after(self.close, exc)


def _check_repeat(repeat) -> int:
    """`repeat` as a byte count > 0; InvalidArgument naming it otherwise (the daemon checks
    the rest: a multiple of its page size that divides the volume's size)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat <= 0:
        raise errors.InvalidArgument(f"repeat {repeat!r} must be a byte count > 0")
    return repeat


def verify(buffer, volume: str, offset: int, repeat: Optional[int] = None) -> None:
    """Checks that `buffer` holds the store's initial pattern of `volume` from `offset` (what a
    get of an extent nobody wrote delivers). `repeat`: the volume's repeat (create_volume), its
    byte o being the pattern's byte o mod repeat. GPU tensors and arrays are copied to the host
    for the check. Raises gdrstore.DataLoss naming the first differing byte."""
    mem = describe(buffer)
    if mem.gpu:
        host = buffer.cpu() if hasattr(buffer, "cpu") else buffer.get()  # torch / CuPy
        mem = describe(host)
    pieces = [(0, mem.nbytes, offset)]  # (at in the buffer, length, offset in the pattern)
    if repeat is not None:
        _check_repeat(repeat)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise errors.InvalidArgument(f"offset {offset!r} must be a byte offset >= 0")
        # Split where the buffer crosses from one period of the volume into the next.
        pieces, at = [], 0
        while at < mem.nbytes or not pieces:
            o = (offset + at) % repeat
            n = min(mem.nbytes - at, repeat - o)
            pieces.append((at, n, o))
            at += n
    bad = ctypes.c_uint64()
    for at, n, o in pieces:
        status = lib.gdrstore_pattern_check(mem.address + at, n, volume, o, ctypes.byref(bad))
        if status == 15:
            raise errors.DataLoss(f"byte {at + bad.value} of the buffer differs from {volume} at "
                                  f"{offset + at + bad.value}")
        _check(status, None)  # a call without a handle records its reason on NULL
