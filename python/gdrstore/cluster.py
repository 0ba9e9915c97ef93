"""Cluster: many gdrstored daemons as one namespace, over the C ABI: a cluster handle
(gdrstore_cluster_open) takes the same buffer, op, stream and poll calls as a client's. A
cluster volume is striped over its members with R replicas; a put is acknowledged when every
replica has every piece, a get reads each piece from its first healthy replica. Its calls are a
Client's (gdrstore.store.Store), with the same arguments."""

import ctypes
import json
import os
import warnings
from typing import Any, Dict, Iterable, Optional, Tuple, Union

from . import errors
from ._native import (ClusterOptions, Result, checked_int, checked_str, client_options,
                      has_cluster, lib, millis, open_handle, set_field)
from .client import Future, Stream, _last_path
from .memory import Memory, describe
from .store import Moved, Store, check as _check

# A cluster's stream is the C ABI's gdrstore_stream_* on the cluster handle: a Client's Stream
# and Future, under the names this package gave them before.
ClusterStream = Stream
ClusterFuture = Future


class Cluster(Store):
    """A cluster of daemons: `Cluster(etcd="etcd://127.0.0.1:2379/prod")` (members registered
    by daemons started with --cluster) or `Cluster(members_file="cluster.json")` (a JSON
    gdrstore.v1.ClusterFile: members and volumes, all taken as present); or
    `gdrstore.connect("etcd://...")` / `gdrstore.connect("file:cluster.json")`.

    Every member is reached as Client reaches a daemon: transport ("tcp", "rc", "dc", "auto"),
    token / token_file, rdma_device, timeout (seconds per op, None: none), tls_ca / tls_cert /
    tls_key / tls_server_name. member_retry: seconds a member that failed is passed over.
    etcd_timeout: seconds per etcd call. crc32c, fail_when_full, require and stream_calls as for
    Client, for each member. etcd_tls_ca / etcd_tls_cert / etcd_tls_key: TLS to etcd (PEM files, gdrctl's
    --cluster-tls-ca/cert/key), the client certificate and key both or neither. A URL or file
    that does not parse, or an etcd TLS file that cannot be read or holds no PEM, raises
    gdrstore.InvalidArgument naming it; etcd not answering or refusing the handshake,
    gdrstore.Unavailable naming the endpoint. Integers are checked as Client checks them.

    Ops, put's sync, the path an op took (Moved.path) and stream() are a Client's: the C ABI's
    calls on the cluster handle."""

    _kind = "Cluster"
    _register_host = "gdrstore_cluster_register_host"
    _register_gpu = "gdrstore_cluster_register_gpu"
    _alloc_host, _release = "gdrstore_cluster_alloc_host", "gdrstore_cluster_buffer_release"

    def __init__(self, etcd: Optional[str] = None,
                 members_file: Optional[Union[str, os.PathLike]] = None,
                 transport: str = "tcp", token: Optional[str] = None,
                 token_file: Optional[str] = None, rdma_device: Optional[str] = None,
                 timeout: Optional[float] = 120.0, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
                 tls_server_name: Optional[str] = None, member_retry: float = 1.0,
                 etcd_timeout: float = 2.0, crc32c: bool = False,
                 fail_when_full: bool = False, require: Optional[str] = None,
                 etcd_tls_ca: Optional[Union[str, os.PathLike]] = None,
                 etcd_tls_cert: Optional[Union[str, os.PathLike]] = None,
                 etcd_tls_key: Optional[Union[str, os.PathLike]] = None,
                 stream_calls: Optional[int] = None):
        if not has_cluster():
            raise errors.Unimplemented("this libgdrclient has no cluster functions "
                                       "(gdrstore_cluster_open); install a newer one")
        if (etcd is None) == (members_file is None):
            raise errors.InvalidArgument("a Cluster needs etcd='etcd://HOST:PORT/PREFIX' or "
                                         "members_file=PATH, exactly one of them")
        client, self._keep = client_options(
            transport=transport, token=token, token_file=token_file, rdma_device=rdma_device,
            timeout=timeout, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
            tls_server_name=tls_server_name, crc32c=crc32c, fail_when_full=fail_when_full,
            require=require, stream_calls=stream_calls)
        opts = ClusterOptions()
        lib.gdrstore_cluster_options_init(ctypes.byref(opts))
        source = [checked_str("etcd", etcd),
                  checked_str("members_file",
                              os.fsencode(members_file) if members_file is not None else None)]
        opts.etcd_url, opts.members_file = source
        opts.client = ctypes.pointer(client)
        set_field(opts, "member_retry_ms", millis("member_retry", member_retry), "member_retry")
        set_field(opts, "etcd_timeout_ms", millis("etcd_timeout", etcd_timeout), "etcd_timeout")
        tls = {"etcd_tls_ca": etcd_tls_ca, "etcd_tls_cert": etcd_tls_cert,
               "etcd_tls_key": etcd_tls_key}
        if any(v is not None for v in tls.values()) and \
                opts.struct_size < ClusterOptions.etcd_tls_key.offset + ctypes.sizeof(
                    ctypes.c_char_p):
            # An older library would not read them and would talk to etcd in plaintext.
            raise errors.Unimplemented("this libgdrclient takes no etcd TLS "
                                       "(gdrstore_cluster_options.etcd_tls_*); install a newer one")
        for field, path in tls.items():
            value = checked_str(field, os.fsencode(path) if path is not None else None)
            self._keep.append(value)
            setattr(opts, field, value)
        self._start(open_handle(lib.gdrstore_cluster_open, opts))

    # ---- lifetime ----
    def close(self) -> None:
        """Closes the streams still open (each waits for its ops), releases every buffer
        (waiting for its ops) and ends the links and the etcd watch. Afterwards every call
        raises gdrstore.FailedPrecondition. Closing again does nothing."""
        if not self._end_streams():
            return  # closed (or closing) already, or never opened
        handle, self._handle = self._handle, None
        lib.gdrstore_cluster_close(handle)

    def _host_address(self, buffer) -> int:
        return lib.gdrstore_cluster_buffer_data(buffer)

    # ---- ops ----
    def _checked(self, put: bool, volume: str, offset: int, obj, length: Optional[int],
                 at: int) -> Tuple[Memory, int]:
        """`obj`'s memory and the op's length, every argument checked (what a stream refuses
        at submission, as a Client's Stream does)."""
        self._open_handle()
        mem = describe(obj)
        if not put and not mem.writable:
            raise ValueError("`into` is read-only; a get needs writable memory")
        checked_str("volume", volume)
        checked_int("offset", offset, ctypes.c_uint64)
        return mem, self._length(mem, length, at)

    def _op(self, put: bool, volume: str, offset: int, mem: Memory, length: int,
            at: int, sync: bool = False) -> Moved:
        handle = self._open_handle()
        reg, temporary, n = self._span(mem, length, at)
        try:
            result = Result()
            if put:
                status = lib.gdrstore_put(handle, reg.handle, at, volume, offset, n,
                                          1 if sync else 0, ctypes.byref(result))
            else:
                status = lib.gdrstore_get(handle, volume, offset, n, reg.handle, at,
                                          ctypes.byref(result))
            _check(status, handle)
            return Moved(result.bytes, _last_path(handle))
        finally:
            if temporary:
                reg.release()

    def put(self, src, volume: str, offset: int, length: Optional[int] = None,
            sync: bool = False, at: int = 0) -> Moved:
        """`src` (from its byte `at` on) -> cluster volume bytes [offset, offset + length) on
        every replica, in place (length defaults to the rest of `src`), as Client.put (sync:
        answered once every replica's file-backed volume has the bytes on disk). Returns the
        bytes moved.

        The order before Client's, put(volume, offset, src), still works (with a
        DeprecationWarning): a str is never memory, so a str first is that order's volume."""
        if isinstance(src, str):
            warnings.warn("Cluster.put(volume, offset, src) is deprecated: put(src, volume, "
                          "offset), as Client.put", DeprecationWarning, stacklevel=2)
            src, volume, offset = offset, src, volume
        mem, n = self._checked(True, volume, offset, src, length, at)
        return self._op(True, volume, offset, mem, n, at, sync)

    def get(self, volume: str, offset: int, into, length: Optional[int] = None,
            at: int = 0) -> Moved:
        """Cluster volume bytes [offset, offset + length) -> `into` from its byte `at` on, in
        place (length defaults to the rest of `into`), as Client.get. Returns the bytes
        moved."""
        mem, n = self._checked(False, volume, offset, into, length, at)
        return self._op(False, volume, offset, mem, n, at)

    def stream(self) -> Stream:
        """Many ops at once, answered in any order, as Client.stream() (the C ABI's stream on
        the cluster handle: each op split over the members' streams); use as a context
        manager."""
        return Stream(self)

    # ---- the cluster ----
    def create_volume(self, name: str, size: Optional[int] = None, file: bool = False,
                      media: Optional[str] = None, *, stripe_unit: int = 4 << 20,
                      replicas: int = 1,
                      members: Optional[Union[str, Iterable[str]]] = None) -> Dict[str, Any]:
        """Lays cluster volume `name` over `members` (ids, a list or "a,b,c"; None: every member
        registered now). Without `size`, each member must serve a volume `name` already; with
        it, the members' volumes are made first (their Admin service), just big enough for
        `size` bytes (whole rows), files in their writable --volume-dir with `file`, `media`
        as Client.create_volume's (whose arguments come first, in its order). etcd clusters
        only. Returns the layout (gdrstore.v1.ClusterVolume as a dict);
        gdrstore.AlreadyExists when the volume exists."""
        handle = self._open_handle()
        if members is not None and not isinstance(members, str):
            members = ",".join(members)
        out = ctypes.c_void_p()
        if size is None:
            if file or media is not None:
                raise errors.InvalidArgument("file and media describe the members' volumes "
                                             "made for `size` bytes: give size too")
            _check(lib.gdrstore_cluster_create_volume(handle, name, stripe_unit, replicas,
                                                      members, ctypes.byref(out)), handle)
        else:
            _check(lib.gdrstore_cluster_make_volume(handle, name, size, stripe_unit, replicas,
                                                    members, int(bool(file)), media,
                                                    ctypes.byref(out)), handle)
        return _take_json(out)

    def delete_volume(self, name: str, delete_file: bool = False, *,
                      member_volumes: bool = False) -> None:
        """Removes cluster volume `name`'s layout (new ops on it: NotFound), and with
        `member_volumes` the volume `name` on each of its members; `delete_file` (as
        Client.delete_volume's) takes the members' volumes away with their files. NotFound
        when it has no layout."""
        handle = self._open_handle()
        _check(lib.gdrstore_cluster_delete_volume(
            handle, name, int(bool(member_volumes or delete_file)), int(bool(delete_file))),
            handle)

    def info(self, volume: Optional[str] = None) -> Dict[str, Any]:
        """status() (each member pinged now), with "volumes" holding `volume`'s layout alone
        when it is given (none when the cluster has no volume of the name)."""
        status = self.status()
        if volume is not None:
            status["volumes"] = [v for v in status.get("volumes", [])
                                 if v.get("name") == volume]
        return status

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
