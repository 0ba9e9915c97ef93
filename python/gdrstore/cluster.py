"""Cluster: many gdrstored daemons as one namespace, over the C ABI's gdrstore_cluster_*. A
cluster volume is striped over its members with R replicas; a put is acknowledged when every
replica has every piece, a get reads each piece from its first healthy replica."""

import ctypes
import json
import os
from typing import Any, Dict, Iterable, Optional, Union

from . import errors
from ._native import (ClusterOptions, checked_int, checked_str, client_options, has_cluster,
                      lib, millis, open_handle, set_field)
from .client import _check
from .memory import Memory, describe
from .registrations import Registration, RegistrationCache


class Cluster:
    """A cluster of daemons: `Cluster(etcd="etcd://127.0.0.1:2379/prod")` (members registered
    by daemons started with --cluster) or `Cluster(members_file="cluster.json")` (a JSON
    gdrstore.v1.ClusterFile: members and volumes, all taken as present).

    Every member is reached as Client reaches a daemon: transport ("tcp", "rc", "dc", "auto"),
    token / token_file, rdma_device, timeout (seconds per op, None: none), tls_ca / tls_cert /
    tls_key / tls_server_name. member_retry: seconds a member that failed is passed over.
    etcd_timeout: seconds per etcd call. crc32c and fail_when_full as for Client. A URL or file
    that does not parse raises gdrstore.InvalidArgument naming it; etcd not answering,
    gdrstore.Unavailable. Integers are checked as Client checks them."""

    def __init__(self, etcd: Optional[str] = None,
                 members_file: Optional[Union[str, os.PathLike]] = None,
                 transport: str = "tcp", token: Optional[str] = None,
                 token_file: Optional[str] = None, rdma_device: Optional[str] = None,
                 timeout: Optional[float] = 120.0, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
                 tls_server_name: Optional[str] = None, member_retry: float = 1.0,
                 etcd_timeout: float = 2.0, crc32c: bool = False,
                 fail_when_full: bool = False):
        self._handle = None
        if not has_cluster():
            raise errors.Unimplemented("this libgdrclient has no cluster functions "
                                       "(gdrstore_cluster_open); install a newer one")
        if (etcd is None) == (members_file is None):
            raise errors.InvalidArgument("a Cluster needs etcd='etcd://HOST:PORT/PREFIX' or "
                                         "members_file=PATH, exactly one of them")
        client, self._keep = client_options(None, transport, token, token_file, rdma_device,
                                            timeout, tls_ca, tls_cert, tls_key,
                                            tls_server_name, crc32c, fail_when_full)
        opts = ClusterOptions()
        lib.gdrstore_cluster_options_init(ctypes.byref(opts))
        source = [checked_str("etcd", etcd),
                  checked_str("members_file",
                              os.fsencode(members_file) if members_file is not None else None)]
        opts.etcd_url, opts.members_file = source
        opts.client = ctypes.pointer(client)
        set_field(opts, "member_retry_ms", millis("member_retry", member_retry), "member_retry")
        set_field(opts, "etcd_timeout_ms", millis("etcd_timeout", etcd_timeout), "etcd_timeout")
        handle = open_handle(lib.gdrstore_cluster_open, opts)
        self._handle = handle
        # Buffers kept while their object lives (objects that take weak references).
        self._regs = RegistrationCache(self._register_memory)

    # ---- lifetime ----
    def close(self) -> None:
        """Releases every buffer (waiting for its ops) and ends the links and the etcd watch."""
        if self._handle is None:
            return
        self._regs.close()
        handle, self._handle = self._handle, None
        lib.gdrstore_cluster_close(handle)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        errors.close_after(self.close, exc)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _open_handle(self):
        if self._handle is None:
            raise errors.FailedPrecondition("the Cluster is closed")
        return self._handle

    # ---- memory ----
    def _register_memory(self, mem: Memory) -> Registration:
        if mem.nbytes == 0:
            raise ValueError("buffer is empty")
        handle = self._open_handle()
        out = ctypes.c_void_p()
        if mem.gpu:
            status = lib.gdrstore_cluster_register_gpu(handle, mem.address, mem.nbytes,
                                                       ctypes.byref(out))
        else:
            status = lib.gdrstore_cluster_register_host(handle, mem.address, mem.nbytes,
                                                        ctypes.byref(out))
        _check(status, handle)
        return Registration(out, mem.nbytes, lib.gdrstore_cluster_buffer_release)

    def register(self, obj) -> None:
        """Keeps `obj`'s memory registered while `obj` lives (each member registers it the
        first time an op there uses it)."""
        self._regs.acquire(describe(obj))

    def registration_handles(self) -> int:
        """Buffers this Cluster keeps alive for live objects (for tests and diagnosis)."""
        return len(self._regs)

    # ---- ops ----
    def _op(self, put: bool, volume: str, offset: int, obj, length: Optional[int],
            at: int = 0) -> int:
        handle = self._open_handle()
        mem = describe(obj)
        if not put and not mem.writable:
            raise ValueError("`into` is read-only; a get needs writable memory")
        checked_int("offset", offset, ctypes.c_uint64)
        if isinstance(at, bool) or not isinstance(at, int):
            raise TypeError(f"at must be an int, not {type(at).__name__}")
        if not 0 <= at <= mem.nbytes:
            raise errors.ArgumentOutOfRange(f"at {at} is outside the {mem.nbytes}-byte buffer")
        n = mem.nbytes - at if length is None else checked_int("length", length,
                                                                ctypes.c_uint64)
        if n > mem.nbytes - at:
            raise errors.ArgumentOutOfRange(f"at {at} + length {n} is past the end of the "
                                            f"{mem.nbytes}-byte buffer")
        reg, temporary = self._regs.acquire(mem)
        try:
            fn = lib.gdrstore_cluster_put if put else lib.gdrstore_cluster_get
            _check(fn(handle, volume, offset, n, reg.handle, at), handle)
            return n
        finally:
            if temporary:
                reg.release()

    def put(self, volume: str, offset: int, src, length: Optional[int] = None,
            at: int = 0) -> int:
        """`src` (from its byte `at` on) -> cluster volume bytes [offset, offset + length) on
        every replica, in place (length defaults to the rest of `src`). Returns the bytes
        moved."""
        return self._op(True, volume, offset, src, length, at)

    def get(self, volume: str, offset: int, into, length: Optional[int] = None,
            at: int = 0) -> int:
        """Cluster volume bytes [offset, offset + length) -> `into` from its byte `at` on, in
        place (length defaults to the rest of `into`). Returns the bytes moved."""
        return self._op(False, volume, offset, into, length, at)

    # ---- the cluster ----
    def create_volume(self, name: str, stripe_unit: int = 4 << 20, replicas: int = 1,
                      members: Optional[Union[str, Iterable[str]]] = None,
                      size: Optional[int] = None, file: bool = False,
                      media: Optional[str] = None) -> Dict[str, Any]:
        """Lays cluster volume `name` over `members` (ids, a list or "a,b,c"; None: every member
        registered now). Without `size`, each member must serve a volume `name` already; with
        it, the members' volumes are made first (their Admin service), just big enough for
        `size` bytes (whole rows), files in their writable --volume-dir with `file`, `media`
        as Client.create_volume's. etcd clusters only. Returns the layout
        (gdrstore.v1.ClusterVolume as a dict); gdrstore.AlreadyExists when the volume exists."""
        handle = self._open_handle()
        if members is not None and not isinstance(members, str):
            members = ",".join(members)
        out = ctypes.c_void_p()
        if size is None:
            _check(lib.gdrstore_cluster_create_volume(handle, name, stripe_unit, replicas,
                                                      members, ctypes.byref(out)), handle)
        else:
            _check(lib.gdrstore_cluster_make_volume(handle, name, size, stripe_unit, replicas,
                                                    members, int(bool(file)), media,
                                                    ctypes.byref(out)), handle)
        return _take_json(out)


    def delete_volume(self, name: str, member_volumes: bool = False,
                      delete_files: bool = False) -> None:
        """Removes cluster volume `name`'s layout (new ops on it: NotFound), and with
        `member_volumes` the volume `name` on each of its members (files too with
        `delete_files`). NotFound when it has no layout."""
        handle = self._open_handle()
        _check(lib.gdrstore_cluster_delete_volume(handle, name, int(bool(member_volumes)),
                                                  int(bool(delete_files))), handle)

    def status(self) -> Dict[str, Any]:
        """{"source", "members": [{"entry", "present", "healthy", "error", "lease_ttl_s", "ops",
        "bytes", "errors"}], "volumes": [layouts]}, each member pinged now. Entries and layouts
        use proto3 JSON (proto field names; 64-bit numbers as strings)."""
        handle = self._open_handle()
        out = ctypes.c_void_p()
        _check(lib.gdrstore_cluster_status_json(handle, ctypes.byref(out)), handle)
        return _take_json(out)


def _take_json(p: ctypes.c_void_p) -> Dict[str, Any]:
    try:
        return json.loads(ctypes.string_at(p).decode())
    finally:
        lib.gdrstore_free(p)
