"""One store surface: the same test bodies run over a Client (one gdrstored) and a Cluster (three
gdrstored registered in a real etcd, test_cluster.py's fixtures), both opened by
gdrstore.connect; and connect itself for each URL scheme and the URLs it refuses. Real
processes on loopback only."""

import json
import warnings

import numpy as np
import pytest

import gdrstore
from conftest import Daemon
from test_cluster import Members, etcd  # noqa: F401 (etcd: a fixture pytest finds here)
from test_environment import Agent, env, read_and_verify  # noqa: F401 (env: a fixture)

MiB = 1 << 20


class Opened:
    """A store opened through connect(url), and the url (to open another)."""

    def __init__(self, url, **options):
        self.url, self.options = url, options
        self.store = gdrstore.connect(url, **options)


@pytest.fixture(scope="module", params=["client", "cluster"])
def opened(request):
    if request.param == "client":
        d = Daemon()
        try:
            o = Opened(d.address)
            yield o
            o.store.close()
        finally:
            d.stop()
        return
    m = Members(request.getfixturevalue("etcd"))
    try:
        m.open().close()  # every member registered
        o = Opened(m.url, member_retry=0.2)
        yield o
        o.store.close()
    finally:
        m.stop()


def pattern(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_the_same_calls_move_the_same_bytes(opened):
    s = opened.store
    s.create_volume("same", 8 * MiB)
    (v,) = s.volumes("same")
    assert v["name"] == "same" and v["size"] >= 8 * MiB
    assert s.volumes("nosuch") == []
    src = pattern(3 * MiB + 5, 1)
    assert s.put(src, "same", 4097) == len(src)
    back = np.zeros(len(src) + 3, dtype=np.uint8)
    assert s.get("same", 4097, back, len(src), at=3) == len(src)
    assert np.array_equal(back[3:], src) and not back[:3].any()
    # The store's own memory works as any buffer does.
    mem = s.allocate(MiB)
    mem[:] = bytes(pattern(MiB, 2))
    s.put(mem, "same", 0, length=4096, at=MiB - 4096)
    got = s.allocate(4096)
    s.get("same", 0, into=got)
    assert bytes(got) == bytes(mem[MiB - 4096:])
    s.register(back)
    assert s.registration_handles() >= 1
    with pytest.raises(gdrstore.ArgumentOutOfRange, match="past the end"):
        s.get("same", 0, back, len(back) + 1)
    with pytest.raises(ValueError, match="read-only"):
        s.get("same", 0, into=bytes(16))
    s.delete_volume("same")
    with pytest.raises(gdrstore.NotFound):
        s.get("same", 0, into=back)


def test_a_stream_answers_every_op_with_a_future(opened):
    s = opened.store
    s.create_volume("streamed", 4 * MiB)
    src = pattern(4 * MiB, 3)
    with s.stream() as st:
        puts = [st.put(src, "streamed", i * MiB, MiB, at=i * MiB) for i in range(4)]
        assert [f.result() for f in st.wait_all()] == [MiB] * 4
    assert all(f.done() and f.latency is not None for f in puts)
    back = np.zeros_like(src)
    with s.stream() as st:
        gets = [st.get("streamed", i * MiB, back, MiB, at=i * MiB) for i in range(4)]
        bad = st.get("nosuch", 0, back)
    assert sum(f.result() for f in gets) == 4 * MiB
    assert np.array_equal(back, src)
    assert isinstance(bad.exception(), gdrstore.NotFound)
    with pytest.raises(gdrstore.FailedPrecondition, match="closed"):
        st.put(src, "streamed", 0)
    st.close()  # again: nothing
    s.delete_volume("streamed")


def test_a_stream_refuses_bad_arguments_when_they_are_submitted(opened):
    buf = np.zeros(4096, dtype=np.uint8)
    with opened.store.stream() as st:
        with pytest.raises(ValueError, match="read-only"):
            st.get("vol0", 0, into=bytes(16))
        with pytest.raises(gdrstore.ArgumentOutOfRange, match="offset -1"):
            st.put(buf, "vol0", -1)
        with pytest.raises(gdrstore.ArgumentOutOfRange, match="past the end"):
            st.get("vol0", 0, buf, 4097)
        with pytest.raises(ValueError, match="NUL"):
            st.get("vol0\0x", 0, into=buf)
        assert st.wait_all() == []  # nothing was submitted


def test_a_closed_store_refuses_every_call(opened):
    other = gdrstore.connect(opened.url, **opened.options)
    with other as s:
        st = s.stream()
    with pytest.raises(gdrstore.FailedPrecondition, match="closed"):
        st.get("vol0", 0, into=bytearray(16))
    for call in (lambda: s.get("vol0", 0, into=bytearray(16)),
                 lambda: s.put(bytearray(16), "vol0", 0), lambda: s.allocate(16),
                 lambda: s.create_volume("late", MiB), s.stream, s.volumes):
        with pytest.raises(gdrstore.FailedPrecondition, match="closed"):
            call()
    s.close()  # again: nothing


def test_safetensors_go_through_either_store(opened):
    torch = pytest.importorskip("torch", reason="torch is not installed for this python")
    from gdrstore.torch import load_safetensors, save_safetensors
    state = {"w": torch.arange(3000, dtype=torch.float32).reshape(30, 100),
             "b": torch.arange(7, dtype=torch.int16)}
    save_safetensors(state, opened.store, "st", file=False)
    back = load_safetensors(opened.store, "st")
    assert back.keys() == state.keys()
    assert all(torch.equal(back[k], state[k]) for k in state)
    opened.store.delete_volume("st")


def test_the_cluster_put_order_of_before_still_works_with_a_warning(etcd):  # noqa: F811
    m = Members(etcd)
    try:
        with m.open() as s:
            s.create_volume("old", MiB)
            src = pattern(4096, 5)
            with pytest.warns(DeprecationWarning, match=r"put\(src, volume, offset\)"):
                assert s.put("old", 8, src) == 4096
            back = np.zeros_like(src)
            s.get("old", 8, into=back)
            assert np.array_equal(back, src)
            # sync and the op's path: the C ABI's store calls on the cluster handle.
            moved = s.put(src, "old", 0, sync=True)
            assert moved == 4096 and moved.path, moved.path
    finally:
        m.stop()


# ---- connect ----

def test_connect_opens_a_daemon_the_agent_and_a_members_file(tmp_path, env):  # noqa: F811
    d = Daemon("--volume", "vol0=4MiB")
    agent = None
    try:
        agent = Agent(d)
        # The URL names the daemon: GDRSTORE_AGENT does not take its place.
        env.setenv("GDRSTORE_AGENT", agent.socket)
        with gdrstore.connect(d.address) as c:
            assert isinstance(c, gdrstore.Client)
            assert not read_and_verify(c, "vol0").path.startswith("agent/")
        with gdrstore.connect(f"agent:{agent.socket}", timeout=30) as c:
            assert isinstance(c, gdrstore.Client)
            assert read_and_verify(c, "vol0").path.startswith("agent/")
        members = tmp_path / "cluster.json"
        members.write_text(json.dumps({
            "members": [{"id": "f0", "address": d.address,
                         "volumes": [{"name": "vol0", "size": str(4 * MiB)}]}],
            "volumes": [{"name": "vol0", "stripe_unit": str(MiB), "members": ["f0"],
                         "replicas": 1, "epoch": "1", "size": str(4 * MiB)}]}))
        with gdrstore.connect(f"file:{members}") as c:
            assert isinstance(c, gdrstore.Cluster)
            read_and_verify(c, "vol0")
        env.delenv("GDRSTORE_AGENT")
        env.setenv("GDRSTORE_ADDRESS", d.address)
        with gdrstore.connect() as c:  # no URL: the environment's, as Client()
            read_and_verify(c, "vol0")
    finally:
        if agent is not None:
            agent.stop()
        d.stop()


def test_connect_opens_a_cluster_through_etcd(etcd):  # noqa: F811
    m = Members(etcd)
    try:
        m.open().close()
        with gdrstore.connect(m.url, member_retry=0.2, etcd_timeout=5) as c:
            assert isinstance(c, gdrstore.Cluster)
            assert len(c.status()["members"]) == 3
    finally:
        m.stop()


@pytest.mark.parametrize("url, named", [
    ("", "empty"),
    (" 127.0.0.1:5", "padded"),
    ("nonsense", "none of HOST:PORT"),
    ("127.0.0.1", "none of HOST:PORT"),
    ("127.0.0.1:0", "port 0 is outside"),
    ("127.0.0.1:65536", "port 65536 is outside"),
    ("127.0.0.1:-1", "none of HOST:PORT"),
    ("http://127.0.0.1:2379/p", "unknown scheme 'http'"),
    ("etcd://127.0.0.1:2379", "names no prefix"),
    ("etcd://127.0.0.1:2379/", "names no prefix"),
    ("etcd:///p", "etcd endpoint '' is not HOST:PORT"),
    ("etcd://127.0.0.1:x/p", "etcd endpoint '127.0.0.1:x'"),
    ("etcd://127.0.0.1:1,b/p", "etcd endpoint 'b'"),
    ("agent:", "names no socket"),
    ("agent:/" + "x" * 200, "at most 107 bytes"),
    ("file:", "names no members file"),
    ("a\0b:1", "NUL"),
    (42, "must be a str, not int"),
])
def test_connect_refuses_a_hostile_url_naming_what_is_wrong(url, named):
    with pytest.raises(gdrstore.InvalidArgument) as e:
        gdrstore.connect(url)
    assert named in str(e.value)


@pytest.mark.parametrize("url, options, named", [
    ("127.0.0.1:1", {"agent": "/tmp/a.sock"}, "agent= names where to go"),
    ("127.0.0.1:1", {"address": "127.0.0.1:2"}, "address= names where to go"),
    ("127.0.0.1:1", {"member_retry": 1}, "member_retry= is not one a Client takes"),
    ("etcd://127.0.0.1:1/p", {"local_socket": "/tmp/s"}, "local_socket= is not one a Cluster"),
    ("etcd://127.0.0.1:1/p", {"members_file": "m.json"}, "members_file= names where to go"),
    ("file:m.json", {"bogus": 1}, "bogus= is not one a Cluster takes"),
])
def test_connect_refuses_an_option_the_kind_does_not_take(url, options, named):
    with pytest.raises(gdrstore.InvalidArgument, match=named):
        gdrstore.connect(url, **options)


def test_connect_names_a_members_file_that_is_missing(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(gdrstore.NotFound, match=str(missing)):
        gdrstore.connect(f"file:{missing}")


def test_no_deprecation_warning_for_the_client_order(opened):
    s = opened.store
    s.create_volume("quiet", MiB)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.put(bytearray(4096), "quiet", 0)
    s.delete_volume("quiet")
