"""The gdrstore Python package against a real gdrstored over tcp: numpy arrays, bytearrays and
(when torch imports) torch CPU tensors moved in place, verified against the store's pattern;
gRPC codes as exception classes; the registration cache; stream futures; a daemon that dies.
CUDA tensors and CuPy arrays are exercised by tests/gpu/run-gpu-tests.sh on a GPU host."""

import signal
import time

import numpy as np
import pytest

import gdrstore
from conftest import Daemon

MiB = 1 << 20


@pytest.fixture
def client(daemon):
    with gdrstore.Client(daemon.address) as c:
        yield c


def test_get_into_a_numpy_array_in_place(client):
    a = np.zeros(4 * MiB + 3, dtype=np.uint8)[3:]  # unaligned start, still contiguous
    assert client.get("vol0", 12345, into=a) == a.nbytes
    gdrstore.verify(a, "vol0", 12345)
    a[100] ^= 0xFF
    with pytest.raises(gdrstore.DataLoss, match="byte 100"):
        gdrstore.verify(a, "vol0", 12345)


def test_put_from_numpy_then_get_back(client):
    src = np.arange(MiB, dtype=np.uint32)
    assert client.put(src, "rw", 8 * MiB) == src.nbytes
    back = np.empty_like(src)
    client.get("rw", 8 * MiB, into=back)
    assert np.array_equal(back, src)


def test_bytearray_and_bytes(client):
    buf = bytearray(64 * 1024)
    client.get("vol0", 0, into=buf)
    gdrstore.verify(np.frombuffer(buf, dtype=np.uint8), "vol0", 0)
    data = bytes(range(256)) * 16
    client.put(data, "rw", 0)
    out = bytearray(len(data))
    client.get("rw", 0, into=memoryview(out))
    assert bytes(out) == data


def test_objects_that_cannot_be_used_in_place_are_refused(client):
    strided = np.zeros((64, 64), dtype=np.uint8)[:, ::2]
    with pytest.raises(ValueError, match="contiguous"):
        client.get("vol0", 0, into=strided)
    with pytest.raises(ValueError, match="read-only"):
        client.get("vol0", 0, into=b"immutable bytes")
    frozen = np.zeros(4096, dtype=np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        client.get("vol0", 0, into=frozen)
    client.put(frozen, "rw", 0)  # a put only reads it
    with pytest.raises(ValueError, match="cannot reach"):
        client.get("vol0", 0, into=[1, 2, 3])


def test_grpc_codes_become_exception_classes_with_the_daemons_message(client):
    a = np.zeros(4096, dtype=np.uint8)
    with pytest.raises(gdrstore.NotFound, match="no-such-volume") as e:
        client.get("no-such-volume", 0, into=a)
    assert e.value.code == 5 and e.value.code_name == "NOT_FOUND"
    assert isinstance(e.value, gdrstore.Error)
    with pytest.raises(gdrstore.OutOfRange):
        client.get("vol0", 64 * MiB - 100, into=a)
    with pytest.raises(gdrstore.InvalidArgument):
        client.get("vol0", 0, into=a, length=a.nbytes + 1)
    with pytest.raises(gdrstore.InvalidArgument, match="carrier-pigeon"):
        gdrstore.Client("127.0.0.1:1", transport="carrier-pigeon")


def test_registration_is_kept_while_the_object_lives(client):
    a = np.zeros(MiB, dtype=np.uint8)
    client.get("vol0", 0, into=a)
    client.get("vol0", MiB, into=a)
    assert client.registration_handles() == 1
    del a
    import gc
    gc.collect()
    assert client.registration_handles() == 0


def test_stream_futures_and_wait_all(client):
    a = np.zeros(64 * 16 * 1024, dtype=np.uint8)
    client.register(a)  # slices then share its registration
    with client.stream() as s:
        futures = [s.get("vol0", i * 16384, into=a[i * 16384:(i + 1) * 16384])
                   for i in range(64)]
        s.wait_all()
        assert all(f.done() and f.result() == 16384 for f in futures)
        bad = s.get("no-such-volume", 0, into=a[:16])
        assert isinstance(bad.exception(timeout=30), gdrstore.NotFound)
    gdrstore.verify(a, "vol0", 0)


def test_ops_at_a_place_in_one_buffer_share_its_registration(client):
    a = np.zeros(4 * 16384, dtype=np.uint8)
    with client.stream() as s:
        futures = [s.get("vol0", i * 16384, a, 16384, at=i * 16384) for i in range(4)]
        s.wait_all()
        assert all(f.result() == 16384 and f.latency is not None and f.latency >= 0
                   for f in futures)
    assert client.registration_handles() == 1
    gdrstore.verify(a, "vol0", 0)
    b = np.zeros(16384, dtype=np.uint8)
    client.get("vol0", 16384, b, 8192, at=8192)
    assert not b[:8192].any()
    gdrstore.verify(b[8192:].copy(), "vol0", 16384)
    client.put(a, "rw", 0, 16384, at=16384)  # a's second quarter -> rw at 0
    c = np.zeros(16384, dtype=np.uint8)
    client.get("rw", 0, c)
    assert (c == a[16384:32768]).all()
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="past the end"):
        client.get("vol0", 0, b, 4096, at=16000)
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="at 16385"):
        client.put(b, "rw", 0, at=16385)
    with pytest.raises(TypeError, match="at must be an int"):
        client.get("vol0", 0, b, 16, at=1.5)


def test_info_and_stats(client):
    info = client.info()
    assert {v["name"] for v in info["volumes"]} == {"vol0", "rw"}
    stats = client.stats()
    assert "total" in stats


class DlpackOnly:
    """An object that offers its memory through DLPack alone (as JAX arrays do)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_producers(client):
    a = np.zeros(MiB, dtype=np.uint16)
    if not hasattr(a, "__dlpack__"):
        pytest.skip("this numpy has no DLPack export to stand in for a producer")
    client.get("vol0", 2 * MiB, into=DlpackOnly(a))
    gdrstore.verify(a, "vol0", 2 * MiB)
    strided = DlpackOnly(np.zeros((512, 512), dtype=np.uint8)[:, ::2])
    with pytest.raises(ValueError, match="not contiguous"):
        client.get("vol0", 0, into=strided)


def test_torch_cpu_tensor(client):
    torch = pytest.importorskip("torch", reason="torch is not installed for this python")
    t = torch.empty(2 * MiB, dtype=torch.uint8)
    client.get("vol0", 777, into=t)
    gdrstore.verify(t.numpy(), "vol0", 777)
    client.put(t, "rw", 16 * MiB)
    u = torch.zeros_like(t)
    client.get("rw", 16 * MiB, into=u)
    assert torch.equal(t, u)


def test_a_daemon_that_dies_is_unavailable():
    d = Daemon("--volume", "v=8MiB")
    c = gdrstore.Client(d.address, timeout=10)
    a = np.zeros(4096, dtype=np.uint8)
    c.get("v", 0, into=a)
    d.stop(signal.SIGKILL)
    with pytest.raises((gdrstore.Unavailable, gdrstore.DeadlineExceeded)):
        c.get("v", 0, into=a)
    c.close()


def test_crc32c_asked_for_is_checked_on_every_op(daemon):
    # The library checks the daemon's CRC32C against the array; a clean get and put pass, and
    # bytes written then read back come out equal.
    with gdrstore.Client(daemon.address, crc32c=True) as c:
        a = np.zeros(3 * MiB + 7, dtype=np.uint8)
        assert c.get("vol0", 4097, into=a) == a.nbytes
        gdrstore.verify(a, "vol0", 4097)
        src = np.arange(MiB, dtype=np.uint32)
        c.put(src, "rw", 8 * MiB + 1)
        back = np.zeros_like(src)
        with c.stream() as s:
            s.get("rw", 8 * MiB + 1, into=back).result()
        assert np.array_equal(src, back)


# ---- issue 29: integers, messages and dtypes at the boundary with the C ABI ----

def test_integers_past_what_the_c_abi_carries_are_refused_not_wrapped(client):
    # ctypes converts modulo 2^64: unchecked, this put landed at offset 8192.
    zeros = np.zeros(8192, dtype=np.uint8)
    client.put(zeros, "rw", 8192)
    ones = np.full(8192, 0xAB, dtype=np.uint8)
    with pytest.raises(gdrstore.ArgumentOutOfRange, match=r"offset 18446744073709559808 .*2\^64"):
        client.put(ones, "rw", 2**64 + 8192)
    back = np.ones(8192, dtype=np.uint8)
    client.get("rw", 8192, into=back)
    assert not back.any()  # nothing landed at 8192

    a = np.zeros(4096, dtype=np.uint8)
    # Both gdrstore's InvalidArgument and Python's OverflowError, naming the argument.
    with pytest.raises(OverflowError, match="offset -1 is outside"):
        client.get("vol0", -1, into=a)
    with pytest.raises(gdrstore.InvalidArgument, match="length -4096"):
        client.get("vol0", 0, into=a, length=-4096)
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="length"):
        client.put(a, "rw", 0, length=2**64)
    with pytest.raises(TypeError, match="offset must be an int, not bool"):
        client.get("vol0", True, into=a)
    with pytest.raises(TypeError, match="offset must be an int, not float"):
        client.get("vol0", 4096.0, into=a)
    client.get("vol0", np.uint64(4096), into=a)  # numpy integers are integers
    gdrstore.verify(a, "vol0", 4096)
    with pytest.raises(ValueError, match="NUL"):
        client.get("vol0\0rw", 0, into=a)  # C would read "vol0"
    with client.stream() as s:
        with pytest.raises(gdrstore.ArgumentOutOfRange, match="offset"):
            s.put(ones, "rw", 2**64 + 8192)
        with pytest.raises(gdrstore.ArgumentOutOfRange, match="length"):
            s.get("vol0", 0, into=a, length=-1)
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="offset"):
        gdrstore.verify(a, "vol0", 2**64 + 4096)
    # A Memory made by hand is checked too (address and size).
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="nbytes -5"):
        client.get("vol0", 0, into=gdrstore.Memory(a.ctypes.data, -5, False, True, a))
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="address"):
        client.get("vol0", 0, into=gdrstore.Memory(2**64 + a.ctypes.data, 16, False, True, a))


def test_timeouts_past_what_the_c_abi_carries_are_refused(daemon):
    # 5e6 s is 5e9 ms: modulo 2^32 that was a 705 s deadline.
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="timeout 5000000.0 s"):
        gdrstore.Client(daemon.address, timeout=5e6)
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="timeout -1.0 s"):
        gdrstore.Client(daemon.address, timeout=-1)
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="timeout nan s"):
        gdrstore.Client(daemon.address, timeout=float("nan"))
    with pytest.raises(TypeError, match="timeout"):
        gdrstore.Client(daemon.address, timeout="10")
    with gdrstore.Client(daemon.address, timeout=4e6) as c:  # 46 days fits
        c.get("vol0", 0, into=np.zeros(16, dtype=np.uint8))


def test_each_thread_reads_the_message_of_its_own_failed_op(client):
    # One Client, 8 threads failing at once, each op on a volume named after it: the status and
    # the message must both be that op's (a per-handle last-error string mixed them up).
    import threading
    threads, ops = 8, 40
    wrong, seen = [], []
    a = np.zeros(4096, dtype=np.uint8)
    client.register(a)

    def run(t):
        for i in range(ops):
            name = f"missing-t{t}-op{i}"
            try:
                if i % 2:
                    client.get(name, 0, into=a)
                else:
                    client.put(a, name, 0)
            except gdrstore.NotFound as e:
                seen.append(name)
                if name not in str(e):
                    wrong.append((name, str(e)))

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(seen) == threads * ops
    assert wrong == [], f"{len(wrong)} of {len(seen)} exceptions carried another op's message"


class CudaArrayInterfaceOnly:
    """Offers memory through __cuda_array_interface__ alone, with whatever it is given."""

    def __init__(self, typestr, shape, descr=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (0x10000, False), "version": 3}
        if descr is not None:
            self.__cuda_array_interface__["descr"] = descr


def _dlpack_capsule(code, bits, shape):
    """A DLPack capsule over host memory with dtype code `code` and `shape`, as a hostile or
    exotic producer would hand it over."""
    import ctypes
    from gdrstore import memory
    dims = (ctypes.c_int64 * len(shape))(*shape)
    storage = (ctypes.c_uint8 * 64)()
    t = memory._DLTensor(ctypes.cast(storage, ctypes.c_void_p), memory._DLDevice(1, 0),
                         len(shape), memory._DLDataType(code, bits, 1),
                         ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64)), None, 0)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(t), b"dltensor", None)
    return capsule, (t, dims, storage)


class DlpackCapsule:
    def __init__(self, code, bits, shape):
        self._capsule, self._keep = _dlpack_capsule(code, bits, shape)

    def __dlpack__(self, stream=None):
        return self._capsule


def test_memory_that_is_not_plain_data_is_refused(client):
    # Unrefused, a get wrote store bytes over the object pointers and the interpreter died.
    objects = np.array([object() for _ in range(512)], dtype=object)
    with pytest.raises(ValueError, match="dtype object"):
        client.get("vol0", 0, into=objects)
    with pytest.raises(ValueError, match="object"):
        client.put(objects, "rw", 0)
    nested = np.zeros(64, dtype=[("n", "i4"), ("o", "O")])
    with pytest.raises(ValueError, match="object references"):
        client.get("vol0", 0, into=nested)
    with pytest.raises(ValueError, match="format 'O'"):
        client.get("vol0", 0, into=memoryview(objects))
    with client.stream() as s:
        with pytest.raises(ValueError, match="dtype object"):
            s.get("vol0", 0, into=objects)
    assert all(type(o) is object for o in objects)  # untouched
    # Plain structured data is data.
    plain = np.zeros(64, dtype=[("n", "i4"), ("f", "f8")])
    client.get("vol0", 0, into=plain)

    # __cuda_array_interface__ and DLPack say their element types in their own words.
    with pytest.raises(ValueError, match="'|O8'"):
        gdrstore.describe(CudaArrayInterfaceOnly("|O8", (4,)))
    with pytest.raises(ValueError, match="field 'o'"):
        gdrstore.describe(CudaArrayInterfaceOnly("|V16", (4,), [("n", "<i8"), ("o", "|O8")]))
    with pytest.raises(ValueError, match="dtype code 3"):
        gdrstore.describe(DlpackCapsule(3, 64, (4,)))  # kDLOpaqueHandle
    assert gdrstore.describe(DlpackCapsule(2, 32, (4,))).nbytes == 16  # float32


def test_shapes_from_an_interface_are_checked_before_any_size_is_computed():
    # Two negative dimensions multiply to a positive size; huge ones pass 2^64.
    with pytest.raises(ValueError, match="count >= 0"):
        gdrstore.describe(CudaArrayInterfaceOnly("<f4", (-2, -4096)))
    with pytest.raises(ValueError, match="more than 2\\^64"):
        gdrstore.describe(CudaArrayInterfaceOnly("<f8", (2**40, 2**40)))
    with pytest.raises(ValueError, match="count >= 0"):
        gdrstore.describe(DlpackCapsule(1, 8, (-2, -4096)))
    with pytest.raises(ValueError, match="typestr"):
        gdrstore.describe(CudaArrayInterfaceOnly("<f-4", (4,)))


def test_a_stream_holds_what_the_daemon_would_refuse_unless_told_to_fail():
    # One op in flight per Stream call, each held 1 s by the volume's latency: eight submitted
    # at once, spread over the stream's 4 calls, are more than the daemon admits. By default
    # the library holds the rest until answers free room; fail_when_full=True asks for the
    # refusal instead.
    d = Daemon("--volume", "slow=8MiB,latency_us=1000000", "--max-inflight-per-stream", "1")
    try:
        a = np.zeros(8 * 4096, dtype=np.uint8)
        with gdrstore.Client(d.address) as c:
            c.register(a)
            with c.stream() as s:
                fs = [s.get("slow", i * 4096, into=a[i * 4096:(i + 1) * 4096]) for i in range(8)]
                assert [f.result(timeout=120) for f in fs] == [4096] * 8
        gdrstore.verify(a, "slow", 0)
        with gdrstore.Client(d.address, fail_when_full=True) as c:
            c.register(a)
            with c.stream() as s:
                fs = [s.get("slow", i * 4096, into=a[i * 4096:(i + 1) * 4096]) for i in range(8)]
                errors = [f.exception(timeout=120) for f in fs]
        refused = [e for e in errors if isinstance(e, gdrstore.ResourceExhausted)]
        assert refused, errors
        assert all(e is None or isinstance(e, gdrstore.ResourceExhausted) for e in errors)
    finally:
        d.stop()


def test_a_stream_spreads_its_ops_over_the_calls_asked_for(daemon):
    # stream_calls reaches the library through the C struct: the daemon counts that many Stream
    # calls open while the stream is (4 when left out), and every op's bytes arrive.
    a = np.zeros(8 * 4096, dtype=np.uint8)
    for calls, want in ((None, 4), (1, 1), (3, 3)):
        with gdrstore.Client(daemon.address, stream_calls=calls) as c:
            c.register(a)
            with c.stream() as s:
                fs = [s.get("vol0", i * 4096, into=a[i * 4096:(i + 1) * 4096]) for i in range(8)]
                assert [f.result(timeout=60) for f in fs] == [4096] * 8
                deadline = time.monotonic() + 10
                while (c.stats().get("admission", {}).get("open_streams", 0) != want
                       and time.monotonic() < deadline):
                    time.sleep(0.02)
                assert c.stats()["admission"].get("open_streams", 0) == want, calls
            gdrstore.verify(a, "vol0", 0)
    with pytest.raises(gdrstore.InvalidArgument, match="stream_calls"):
        gdrstore.Client(daemon.address, stream_calls=65)
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="stream_calls"):
        gdrstore.Client(daemon.address, stream_calls=-1)
