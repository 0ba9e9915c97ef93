"""Loading libgdrclient.so and declaring the C ABI (gdrstore/gdrstore.h) to ctypes."""

import ctypes
import ctypes.util
import os

from . import errors

ABI_VERSION = 1


class ClientOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("daemon_address", ctypes.c_char_p),
        ("transport", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("token_file", ctypes.c_char_p),
        ("rdma_device", ctypes.c_char_p),
        ("rpc_timeout_ms", ctypes.c_uint32),
        # Appended later; the library reads them only when struct_size covers them.
        ("tls_ca", ctypes.c_char_p),
        ("tls_cert", ctypes.c_char_p),
        ("tls_key", ctypes.c_char_p),
        ("tls_server_name", ctypes.c_char_p),
        ("crc32c", ctypes.c_uint32),
    ]


class ClusterOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("etcd_url", ctypes.c_char_p),
        ("members_file", ctypes.c_char_p),
        ("client", ctypes.POINTER(ClientOptions)),
        ("member_retry_ms", ctypes.c_uint32),
        ("etcd_timeout_ms", ctypes.c_uint32),
    ]


class BufferInfo(ctypes.Structure):
    _fields_ = [
        ("host", ctypes.c_void_p),
        ("address", ctypes.c_uint64),
        ("size", ctypes.c_size_t),
        ("gpu_ordinal", ctypes.c_int),
        ("writable", ctypes.c_int),
    ]


class Result(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint64), ("service_ns", ctypes.c_uint64)]


class Completion(ctypes.Structure):
    _fields_ = [
        ("tag", ctypes.c_uint64),
        ("status", ctypes.c_int),
        ("bytes", ctypes.c_uint64),
        ("service_ns", ctypes.c_uint64),
        ("message", ctypes.c_char * 256),
    ]


def _candidates():
    explicit = os.environ.get("GDRSTORE_LIBRARY")
    if explicit:
        return [explicit]
    names = ["libgdrclient.so.1"]
    found = ctypes.util.find_library("gdrclient")
    if found:
        names.append(found)
    return names


def _load():
    errors = []
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"{name}: {e}")
            continue
        _declare(lib)
        version = lib.gdrstore_abi_version()
        if version != ABI_VERSION:
            raise ImportError(f"{name} speaks C ABI {version}; this package needs {ABI_VERSION}")
        return lib
    raise ImportError(
        "cannot load libgdrclient (install it with `cmake --install` or the .deb, or point "
        "GDRSTORE_LIBRARY at libgdrclient.so.1): " + "; ".join(errors))


def _declare(lib):
    P = ctypes.c_void_p
    u64, sz, i = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int
    sig = {
        "gdrstore_abi_version": (ctypes.c_uint32, []),
        "gdrstore_status_name": (ctypes.c_char_p, [i]),
        "gdrstore_error": (ctypes.c_char_p, [P]),
        "gdrstore_client_options_init": (None, [ctypes.POINTER(ClientOptions)]),
        "gdrstore_client_open": (i, [ctypes.POINTER(ClientOptions), ctypes.POINTER(P),
                                     ctypes.c_char_p, sz]),
        "gdrstore_client_close": (None, [P]),
        "gdrstore_info_json": (i, [P, ctypes.POINTER(ctypes.c_void_p)]),
        "gdrstore_stats_json": (i, [P, ctypes.POINTER(ctypes.c_void_p)]),
        "gdrstore_free": (None, [P]),
        "gdrstore_register_host": (i, [P, P, sz, ctypes.POINTER(P)]),
        "gdrstore_register_gpu": (i, [P, u64, sz, ctypes.POINTER(P)]),
        "gdrstore_buffer_release": (None, [P]),
        "gdrstore_buffer_get_info": (None, [P, ctypes.POINTER(BufferInfo)]),
        "gdrstore_verify": (i, [P, sz, sz, ctypes.c_char_p, u64, ctypes.POINTER(u64)]),
        "gdrstore_pattern_check": (i, [P, sz, ctypes.c_char_p, u64, ctypes.POINTER(u64)]),
        "gdrstore_get": (i, [P, ctypes.c_char_p, u64, u64, P, sz, ctypes.POINTER(Result)]),
        "gdrstore_put": (i, [P, P, sz, ctypes.c_char_p, u64, u64, i, ctypes.POINTER(Result)]),
        "gdrstore_stream_open": (i, [P, ctypes.POINTER(P)]),
        "gdrstore_stream_get": (i, [P, ctypes.c_char_p, u64, u64, P, sz, u64]),
        "gdrstore_stream_put": (i, [P, P, sz, ctypes.c_char_p, u64, u64, u64]),
        "gdrstore_poll": (i, [P, ctypes.POINTER(Completion), sz, i, ctypes.POINTER(sz)]),
        "gdrstore_stream_outstanding": (sz, [P]),
        "gdrstore_stream_close": (i, [P]),
    }
    P_out = ctypes.POINTER(P)
    # Added after the first release of ABI 1: a library without them still loads, and only
    # gdrstore.Cluster says what is missing.
    cluster_sig = {
        "gdrstore_cluster_options_init": (None, [ctypes.POINTER(ClusterOptions)]),
        "gdrstore_cluster_open": (i, [ctypes.POINTER(ClusterOptions), P_out, ctypes.c_char_p,
                                      sz]),
        "gdrstore_cluster_close": (None, [P]),
        "gdrstore_cluster_alloc_host": (i, [P, sz, P_out]),
        "gdrstore_cluster_register_host": (i, [P, P, sz, P_out]),
        "gdrstore_cluster_register_gpu": (i, [P, u64, sz, P_out]),
        "gdrstore_cluster_buffer_release": (None, [P]),
        "gdrstore_cluster_buffer_data": (P, [P]),
        "gdrstore_cluster_buffer_size": (sz, [P]),
        "gdrstore_cluster_put": (i, [P, ctypes.c_char_p, u64, u64, P, sz]),
        "gdrstore_cluster_get": (i, [P, ctypes.c_char_p, u64, u64, P, sz]),
        "gdrstore_cluster_create_volume": (i, [P, ctypes.c_char_p, u64, ctypes.c_uint32,
                                               ctypes.c_char_p, P_out]),
        "gdrstore_cluster_status_json": (i, [P, P_out]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in cluster_sig.items():
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        fn.restype = restype
        fn.argtypes = argtypes


def has_cluster():
    """Whether the loaded library has the cluster functions (gdrstore_cluster_*)."""
    return hasattr(lib, "gdrstore_cluster_open")


lib = _load()


def client_options(address, transport, token, token_file, rdma_device, timeout, tls_ca,
                   tls_cert, tls_key, tls_server_name, crc32c=False):
    """A filled gdrstore_client_options and the encoded strings it points into (keep both
    alive while the library may read them). `address` None: the library's default."""
    opts = ClientOptions()
    lib.gdrstore_client_options_init(ctypes.byref(opts))
    keep = [s.encode() if s is not None else None
            for s in (address, transport, token, token_file, rdma_device, tls_ca, tls_cert,
                      tls_key, tls_server_name)]
    names = ("daemon_address", "transport", "token", "token_file", "rdma_device", "tls_ca",
             "tls_cert", "tls_key", "tls_server_name")
    for name, value in zip(names, keep):
        if name != "daemon_address" or value is not None:
            setattr(opts, name, value)
    opts.rpc_timeout_ms = 0 if timeout is None else max(1, int(timeout * 1000))
    opts.crc32c = 1 if crc32c else 0
    return opts, keep


def open_handle(open_fn, opts):
    """Calls gdrstore_client_open or gdrstore_cluster_open with `opts`; the handle, or the
    library's error (its message from the error buffer) raised as the package's exception."""
    handle = ctypes.c_void_p()
    err = ctypes.create_string_buffer(1024)
    status = open_fn(ctypes.byref(opts), ctypes.byref(handle), err, len(err))
    if status != 0:
        raise errors.from_status(status, err.value.decode(errors="replace"))
    return handle
