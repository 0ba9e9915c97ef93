"""Loading libgdrclient.so and declaring the C ABI (gdrstore/gdrstore.h) to ctypes.

Every value the package hands the library passes one check here first: ctypes itself converts
an int to a C integer modulo 2^bits (2**64 + 8192 becomes 8192, -1 becomes 2**64 - 1) and cuts
a string at its first NUL, so each declared function is wrapped by a checker that refuses, by
argument name, an int outside its C type's range, a bool, float or other non-int where an
integer goes, and a string with an embedded NUL. Struct fields go through set_field."""

import ctypes
import ctypes.util
import operator
import os

from . import errors

ABI_VERSION = 1


class ClientOptions(ctypes.Structure):
    # gdrstore_client_options: after struct_size, the fields of connection_options.h's list in
    # its order (tests/python/test_connection_options.py holds the two together).
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
        ("fail_when_full", ctypes.c_uint32),
        ("agent", ctypes.c_char_p),
        ("local_socket", ctypes.c_char_p),
        ("require", ctypes.c_char_p),
        ("stream_calls", ctypes.c_uint32),
    ]


class ClusterOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("etcd_url", ctypes.c_char_p),
        ("members_file", ctypes.c_char_p),
        ("client", ctypes.POINTER(ClientOptions)),
        ("member_retry_ms", ctypes.c_uint32),
        ("etcd_timeout_ms", ctypes.c_uint32),
        # Appended later; the library reads them only when struct_size covers them.
        ("etcd_tls_ca", ctypes.c_char_p),
        ("etcd_tls_cert", ctypes.c_char_p),
        ("etcd_tls_key", ctypes.c_char_p),
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


# Where a wheel (scripts/build-wheel.sh) puts the library and what it loads; absent in the
# source tree and in the .deb's package.
_CARRIED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")
# The host's RDMA stack, in load order, which a wheel carries only as a stand-in (_lib/host/,
# outside the carried libraries' RPATH): libibverbs loads the host's providers, which bind to it
# by name and must match it, so the host's own copy is the one to use wherever there is one.
_HOST_FIRST = ("libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1")


def _candidates():
    """GDRSTORE_LIBRARY when set, else the library a wheel carries, else the system's."""
    explicit = os.environ.get("GDRSTORE_LIBRARY")
    if explicit:
        return [explicit]
    carried = os.path.join(_CARRIED, "libgdrclient.so.1")
    if os.path.exists(carried):
        _load_host_first()
        return [carried]
    names = ["libgdrclient.so.1"]
    found = ctypes.util.find_library("gdrclient")
    if found:
        names.append(found)
    return names


def _load_host_first():
    """Loads the host's RDMA libraries, or the wheel's stand-ins where the host has none, before
    the carried library: the loader then meets its needs for them by name with whichever is
    already loaded."""
    for name in _HOST_FIRST:
        stand_in = os.path.join(_CARRIED, "host", name)
        if not os.path.exists(stand_in):
            continue
        try:
            ctypes.CDLL(name)
        except OSError:
            try:
                ctypes.CDLL(stand_in)
            except OSError:
                pass  # the carried library's load then fails, naming what it lacks


def _load():
    global path
    errors = []
    for name in _candidates():
        try:
            cdll = ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"{name}: {e}")
            continue
        lib = _declare(cdll)
        version = lib.gdrstore_abi_version()
        if version != ABI_VERSION:
            raise ImportError(f"{name} speaks C ABI {version}; this package needs {ABI_VERSION}")
        path = name
        return lib
    raise ImportError(
        "cannot load libgdrclient (install it with `cmake --install` or the .deb, or point "
        "GDRSTORE_LIBRARY at libgdrclient.so.1): " + "; ".join(errors))


_INT_TYPES = (ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_uint8,
              ctypes.c_uint16, ctypes.c_int64)


def int_range(ctype):
    """(lowest, highest, C name) of the integer ctypes type `ctype` (c_void_p: an address)."""
    bits = 8 * ctypes.sizeof(ctype)
    if ctype is ctypes.c_void_p:
        return 0, (1 << bits) - 1, "an address"
    signed = ctype(-1).value == -1
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1, f"int{bits}_t"
    name = "size_t" if ctype is ctypes.c_size_t else f"uint{bits}_t"
    return 0, (1 << bits) - 1, name


def checked_int(name, value, ctype):
    """`value` as an int that C type `ctype` carries unchanged. TypeError naming `name` for a
    bool, float or anything that is not an integer (numpy integers are); ArgumentOutOfRange
    (an InvalidArgument and an OverflowError) naming `name`, the value and the range otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        value = operator.index(value)  # ints and numpy integers; floats refused
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    lo, hi, cname = int_range(ctype)
    if not lo <= value <= hi:
        raise errors.ArgumentOutOfRange(
            f"{name} {value} is outside [{lo}, {hi}] ({cname}; {_pow2(hi)})")
    return value


def _pow2(hi):
    bits = hi.bit_length()
    return f"at most 2^{bits} - 1" if hi == (1 << bits) - 1 else f"at most {hi}"


def checked_str(name, value):
    """`value` (str, bytes or None) as the bytes a C string carries whole."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode()
    elif not isinstance(value, bytes):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if b"\0" in value:
        raise ValueError(f"{name} {value!r} contains a NUL byte, where C would cut it short")
    return value


def set_field(struct, field, value, name=None):
    """Sets `field` of a ctypes Structure through the same checks as a function argument."""
    ctype = dict(struct._fields_)[field]
    setattr(struct, field, _check_arg(name or field, value, ctype))


def _check_arg(name, value, ctype):
    if isinstance(value, _CTYPES_OBJECTS):  # memory ctypes owns (out buffers, handles)
        return value
    if ctype in _INT_TYPES:
        return checked_int(name, value, ctype)
    if ctype is ctypes.c_char_p:
        return checked_str(name, value)
    if ctype is ctypes.c_void_p and value is not None:
        return checked_int(name, value, ctypes.c_void_p)
    return value


_CTYPES_OBJECTS = (ctypes.Array, ctypes._Pointer, ctypes._SimpleCData, ctypes.Structure,
                   type(ctypes.byref(ctypes.c_int())))


class _Checked:
    """A C function whose integer and string arguments are checked before ctypes sees them."""

    __slots__ = ("_fn", "_checks", "__name__")

    def __init__(self, fn, params):
        self._fn = fn
        self.__name__ = fn.__name__
        self._checks = [(i, name, t) for i, (name, t) in enumerate(params)
                        if t in _INT_TYPES or t in (ctypes.c_char_p, ctypes.c_void_p)]

    def __call__(self, *args):
        args = list(args)
        for i, name, t in self._checks:
            args[i] = _check_arg(name, args[i], t)
        return self._fn(*args)


class _Library:
    """The loaded library with each declared function wrapped by _Checked."""

    def __init__(self, cdll):
        self._cdll = cdll


def _declare(cdll):
    P = ctypes.c_void_p
    P_out = ctypes.POINTER(P)
    u64, u32, sz, i, s = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_int, \
        ctypes.c_char_p
    # Each parameter named as errors should name it.
    sig = {
        "gdrstore_abi_version": (u32, []),
        "gdrstore_status_name": (s, [("status", i)]),
        "gdrstore_error": (s, [("handle", P)]),
        "gdrstore_last_path": (s, [("client", P)]),
        "gdrstore_client_options_init": (None, [("options", ctypes.POINTER(ClientOptions))]),
        "gdrstore_client_open": (i, [("options", ctypes.POINTER(ClientOptions)),
                                     ("client", P_out), ("error", s), ("error_len", sz)]),
        "gdrstore_client_close": (None, [("client", P)]),
        "gdrstore_info_json": (i, [("client", P), ("json", P_out)]),
        "gdrstore_stats_json": (i, [("client", P), ("json", P_out)]),
        "gdrstore_volume_info_json": (i, [("client", P), ("volume", s), ("json", P_out)]),
        "gdrstore_free": (None, [("p", P)]),
        "gdrstore_volume_create": (i, [("client", P), ("name", s), ("size", u64), ("file", i),
                                       ("media", s), ("created", ctypes.POINTER(i))]),
        "gdrstore_volume_delete": (i, [("client", P), ("name", s), ("delete_file", i)]),
        "gdrstore_register_host": (i, [("client", P), ("address", P), ("nbytes", sz),
                                       ("buffer", P_out)]),
        "gdrstore_register_gpu": (i, [("client", P), ("device pointer", u64), ("nbytes", sz),
                                      ("buffer", P_out)]),
        "gdrstore_alloc_host": (i, [("client", P), ("nbytes", sz), ("buffer", P_out)]),
        "gdrstore_buffer_release": (None, [("buffer", P)]),
        "gdrstore_buffer_get_info": (None, [("buffer", P), ("info", ctypes.POINTER(BufferInfo))]),
        "gdrstore_verify": (i, [("buffer", P), ("buffer_offset", sz), ("length", sz),
                                ("volume", s), ("offset", u64), ("first_bad", ctypes.POINTER(u64))]),
        "gdrstore_pattern_check": (i, [("address", P), ("length", sz), ("volume", s),
                                       ("offset", u64), ("first_bad", ctypes.POINTER(u64))]),
        "gdrstore_get": (i, [("client", P), ("volume", s), ("offset", u64), ("length", u64),
                             ("buffer", P), ("buffer_offset", sz),
                             ("result", ctypes.POINTER(Result))]),
        "gdrstore_put": (i, [("client", P), ("buffer", P), ("buffer_offset", sz), ("volume", s),
                             ("offset", u64), ("length", u64), ("sync", i),
                             ("result", ctypes.POINTER(Result))]),
        "gdrstore_stream_open": (i, [("client", P), ("stream", P_out)]),
        "gdrstore_stream_get": (i, [("stream", P), ("volume", s), ("offset", u64),
                                    ("length", u64), ("buffer", P), ("buffer_offset", sz),
                                    ("tag", u64)]),
        "gdrstore_stream_put": (i, [("stream", P), ("buffer", P), ("buffer_offset", sz),
                                    ("volume", s), ("offset", u64), ("length", u64),
                                    ("tag", u64)]),
        "gdrstore_poll": (i, [("stream", P), ("completions", ctypes.POINTER(Completion)),
                              ("max", sz), ("timeout_ms", i), ("count", ctypes.POINTER(sz))]),
        "gdrstore_stream_outstanding": (sz, [("stream", P)]),
        "gdrstore_stream_close": (i, [("stream", P)]),
    }
    # Added after the first release of ABI 1: a library without them still loads, and only
    # gdrstore.Cluster says what is missing.
    cluster_sig = {
        "gdrstore_cluster_options_init": (None, [("options", ctypes.POINTER(ClusterOptions))]),
        "gdrstore_cluster_open": (i, [("options", ctypes.POINTER(ClusterOptions)),
                                      ("cluster", P_out), ("error", s), ("error_len", sz)]),
        "gdrstore_cluster_close": (None, [("cluster", P)]),
        "gdrstore_cluster_alloc_host": (i, [("cluster", P), ("nbytes", sz), ("buffer", P_out)]),
        "gdrstore_cluster_register_host": (i, [("cluster", P), ("address", P), ("nbytes", sz),
                                               ("buffer", P_out)]),
        "gdrstore_cluster_register_gpu": (i, [("cluster", P), ("device pointer", u64),
                                              ("nbytes", sz), ("buffer", P_out)]),
        "gdrstore_cluster_buffer_release": (None, [("buffer", P)]),
        "gdrstore_cluster_buffer_data": (P, [("buffer", P)]),
        "gdrstore_cluster_buffer_size": (sz, [("buffer", P)]),
        "gdrstore_cluster_put": (i, [("cluster", P), ("volume", s), ("offset", u64),
                                     ("length", u64), ("buffer", P), ("buffer_offset", sz)]),
        "gdrstore_cluster_get": (i, [("cluster", P), ("volume", s), ("offset", u64),
                                     ("length", u64), ("buffer", P), ("buffer_offset", sz)]),
        "gdrstore_cluster_create_volume": (i, [("cluster", P), ("name", s), ("stripe_unit", u64),
                                               ("replicas", u32), ("members", s),
                                               ("layout_json", P_out)]),
        "gdrstore_cluster_make_volume": (i, [("cluster", P), ("name", s), ("size", u64),
                                             ("stripe_unit", u64), ("replicas", u32),
                                             ("members", s), ("file", i), ("media", s),
                                             ("layout_json", P_out)]),
        "gdrstore_cluster_delete_volume": (i, [("cluster", P), ("name", s),
                                               ("member_volumes", i), ("delete_files", i)]),
        "gdrstore_cluster_status_json": (i, [("cluster", P), ("json", P_out)]),
    }
    lib = _Library(cdll)
    for table, required in ((sig, True), (cluster_sig, False)):
        for name, (restype, params) in table.items():
            fn = getattr(cdll, name, None)
            if fn is None:
                if required:
                    raise ImportError(f"libgdrclient has no {name}")
                continue
            fn.restype = restype
            fn.argtypes = [t for _, t in params]
            setattr(lib, name, _Checked(fn, params))
    return lib


def has_cluster():
    """Whether the loaded library has the cluster functions (gdrstore_cluster_*)."""
    return hasattr(lib, "gdrstore_cluster_open")


path = None  # the library loaded: a path, or the name the loader found
lib = _load()


def millis(name, seconds, ctype=ctypes.c_uint32, minimum=1):
    """`seconds` (a real number, not bool) as whole milliseconds in C type `ctype`, at least
    `minimum`. TypeError / ArgumentOutOfRange naming `name` (negative, NaN, infinite, or more
    milliseconds than `ctype` holds)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) and \
            not hasattr(seconds, "__float__"):
        raise TypeError(f"{name} must be a number of seconds, not {type(seconds).__name__}")
    seconds = float(seconds)
    lo, hi, cname = int_range(ctype)
    if not 0 <= seconds <= hi / 1000:  # NaN fails too
        raise errors.ArgumentOutOfRange(
            f"{name} {seconds} s is outside [0, {hi / 1000:g}] s ({cname} milliseconds)")
    return max(minimum, int(seconds * 1000))


# The keyword arguments of Client (and Cluster) named otherwise than their ClientOptions field,
# and the fields that hold a path (str, bytes or os.PathLike).
_KEYWORD_OF = {"daemon_address": "address", "rpc_timeout_ms": "timeout"}
_PATHS = ("token_file", "agent", "local_socket")
# The uint32 fields that are numbers, not flags (0: the library's default).
_COUNTS = ("stream_calls",)


def client_options(**given):
    """A filled gdrstore_client_options from Client's keyword arguments (each field's keyword:
    its name, or _KEYWORD_OF's), and the encoded strings it points into (keep both alive while
    the library may read them). One left out or None: the library's default (timeout None: no
    deadline). TypeError naming a keyword that is no field's."""
    opts = ClientOptions()
    lib.gdrstore_client_options_init(ctypes.byref(opts))
    keep = []
    for field, ctype in ClientOptions._fields_[1:]:
        name = _KEYWORD_OF.get(field, field)
        value = given.pop(name, None)
        if field == "rpc_timeout_ms":
            set_field(opts, field, 0 if value is None else millis(name, value), name)
        elif field in _COUNTS:
            set_field(opts, field, 0 if value is None else value, name)
        elif ctype is ctypes.c_uint32:  # a flag
            setattr(opts, field, 1 if value else 0)
        else:
            if field in _PATHS and value is not None:
                value = os.fsencode(value)
            value = checked_str(name, value)
            keep.append(value)
            setattr(opts, field, value)
    if given:
        raise TypeError(f"no connection option {sorted(given)[0]}")
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
