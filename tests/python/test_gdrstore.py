"""The gdrstore Python package against a real gdrstored over tcp: numpy arrays, bytearrays and
(when torch imports) torch CPU tensors moved in place, verified against the store's pattern;
gRPC codes as exception classes; the registration cache; stream futures; a daemon that dies.
CUDA tensors and CuPy arrays are exercised by tests/gpu/run-gpu-tests.sh on a GPU host."""

import signal

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
