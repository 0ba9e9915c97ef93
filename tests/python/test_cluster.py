"""gdrstore.Cluster against real processes on loopback: a real etcd (/usr/bin/etcd, skipped with
the reason when absent) and three gdrstored registered in it with --cluster, or daemons named
by a static members file. Every byte moved is checked against what was put; members are killed
with SIGKILL by the PID this module started."""

import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
import uuid

import numpy as np
import pytest

import gdrstore
from conftest import Daemon

MiB = 1 << 20
ETCD = "/usr/bin/etcd"
TTL_S = 3


def free_ports(n):
    """n distinct loopback ports, free when this returns (held together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Etcd:
    """One etcd member on two free loopback ports with a scratch data dir. With `tls` (a dict of
    PEM paths: ca, server_cert, server_key, client_cert, client_key) its client port takes TLS
    only, with client certificates of `ca` (etcd's --client-cert-auth)."""

    def __init__(self, tls=None):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdrstore-py-etcd-")
        client_port, peer_port = free_ports(2)
        self.endpoint = f"127.0.0.1:{client_port}"
        scheme = "https" if tls else "http"
        client_url, peer_url = f"{scheme}://{self.endpoint}", f"http://127.0.0.1:{peer_port}"
        tls_flags, context = [], None
        if tls:
            tls_flags = ["--cert-file", tls["server_cert"], "--key-file", tls["server_key"],
                         "--trusted-ca-file", tls["ca"], "--client-cert-auth"]
            context = ssl.create_default_context(cafile=tls["ca"])
            context.load_cert_chain(tls["client_cert"], tls["client_key"])
        self.log = open(os.path.join(self.tmp.name, "etcd.log"), "wb")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "gdr-py", "--data-dir", os.path.join(self.tmp.name, "data"),
             "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"gdr-py={peer_url}", "--initial-cluster-state", "new",
             "--logger", "zap", "--log-outputs", "stderr", *tls_flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self._wait_healthy(client_url, context)
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self, client_url, context):
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited {self.proc.returncode}: see {self.log.name}")
            try:
                with urllib.request.urlopen(f"{client_url}/health", timeout=1,
                                            context=context) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd did not answer /health in 30 s: see {self.log.name}")
            time.sleep(0.05)

    def url(self, prefix):
        return f"etcd://{self.endpoint}/{prefix}"

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log.close()
        self.tmp.cleanup()


@pytest.fixture(scope="module")
def etcd():
    if not os.access(ETCD, os.X_OK):
        pytest.skip(f"no etcd at {ETCD} (install the Debian package etcd-server)")
    e = Etcd()
    try:
        yield e
    finally:
        e.stop()


class Members:
    """Three daemons m0..m2 registered under a prefix of their own, each serving vol0 (64 MiB)
    and rep (32 MiB)."""

    def __init__(self, etcd):
        self.url = etcd.url(f"py-{uuid.uuid4().hex[:8]}")
        self.daemons = []
        try:
            for i in range(3):
                self.daemons.append(Daemon(
                    "--cluster", self.url, "--cluster-id", f"m{i}", "--cluster-ttl", str(TTL_S),
                    "--volume", "vol0=64MiB", "--volume", "rep=32MiB"))
        except BaseException:
            self.stop()
            raise

    def open(self, **kw):
        c = gdrstore.Cluster(etcd=self.url, member_retry=0.2, **kw)
        deadline = time.monotonic() + 15
        while sum(m["present"] for m in c.status()["members"]) < 3:
            assert time.monotonic() < deadline, f"members did not register: {c.status()}"
            time.sleep(0.1)
        return c

    def stop(self):
        for d in self.daemons:
            d.stop()


@pytest.fixture
def members(etcd):
    m = Members(etcd)
    try:
        yield m
    finally:
        m.stop()


def pattern(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def unaligned(n):
    """n writable bytes starting 3 bytes past an allocation's start."""
    return np.full(n + 3, 0xEE, dtype=np.uint8)[3:]


# (offset, length): 1 B .. 64 MiB, none aligned to a page or a stripe unit, crossing units.
OPS = [(1, 1), (4097, 4095), (4 * MiB - 3, 7), (12 * MiB + 5, 4 * MiB + 3),
       (33 * MiB + 4099, 29 * MiB + 1), (65 * MiB + 1, 64 * MiB)]


def test_striped_puts_and_gets_are_verified_and_every_member_carries_a_share(members):
    with members.open() as c, members.open() as reader:
        layout = c.create_volume("vol0", stripe_unit=4 * MiB, replicas=1)
        assert layout["members"] == ["m0", "m1", "m2"]
        assert int(layout["size"]) == 3 * 64 * MiB and layout["replicas"] == 1
        with pytest.raises(gdrstore.AlreadyExists, match="vol0"):
            c.create_volume("vol0")
        moved = 0
        for seed, (offset, length) in enumerate(OPS):
            src = pattern(length, seed)
            assert c.put(src, "vol0", offset) == length
            back = unaligned(length)
            assert reader.get("vol0", offset, into=back) == length
            assert np.array_equal(back, src), f"[{offset}, +{length}) differs"
            moved += length
        # Other kinds of memory, in place: a bytearray and a slice of a registered array.
        raw = bytearray(5 * MiB + 1)
        reader.get("vol0", 12 * MiB + 5, into=raw)
        assert np.array_equal(np.frombuffer(raw, dtype=np.uint8)[:4 * MiB + 3], pattern(
            4 * MiB + 3, 3))
        big = np.zeros(8 * MiB, dtype=np.uint8)
        reader.register(big)
        reader.get("vol0", 4097, into=big[100:100 + 4095])
        assert np.array_equal(big[100:100 + 4095], pattern(4095, 1))
        assert reader.registration_handles() >= 1

        # Each member carried part of it, by this client's count and by the daemon's own.
        status = c.status()
        by_member = {m["entry"]["id"]: m["bytes"] for m in status["members"]}
        assert sum(by_member.values()) == moved
        assert all(b > 0 for b in by_member.values()), by_member
        for d in members.daemons:
            with gdrstore.Client(d.address) as direct:
                total = direct.stats()["total"]
                assert int(total.get("read_bytes", 0)) + int(total.get("write_bytes", 0)) > 0


def test_status_names_members_with_their_addresses_and_volumes(members):
    with members.open() as c:
        c.create_volume("rep", stripe_unit=MiB, replicas=2, members=["m2", "m0", "m1"])
        s = c.status()
        assert s["source"] == members.url
        by_id = {m["entry"]["id"]: m for m in s["members"]}
        assert set(by_id) == {"m0", "m1", "m2"}
        for i, d in enumerate(members.daemons):
            m = by_id[f"m{i}"]
            assert m["entry"]["address"] == d.address
            assert m["present"] and m["healthy"] and m["error"] == ""
            assert 0 < m["lease_ttl_s"] <= TTL_S
            assert {v["name"] for v in m["entry"]["volumes"]} == {"vol0", "rep"}
        [rep] = s["volumes"]
        assert rep["name"] == "rep" and rep["members"] == ["m2", "m0", "m1"]
        assert rep["replicas"] == 2 and int(rep["stripe_unit"]) == MiB


def test_with_two_replicas_gets_survive_a_member_killed(members):
    chunk = 3 * MiB + 11  # crosses stripe units and members, unaligned
    with members.open() as c:
        layout = c.create_volume("rep", stripe_unit=MiB, replicas=2)
        n = int(layout["size"]) // chunk
        assert n >= 8
        for i in range(n):
            c.put(pattern(chunk, 100 + i), "rep", i * chunk)
        victim = members.daemons[1]
        victim.stop(signal.SIGKILL)
        assert victim.proc.returncode == -signal.SIGKILL
        for i in range(n):
            back = unaligned(chunk)
            c.get("rep", i * chunk, into=back)
            assert np.array_equal(back, pattern(chunk, 100 + i)), f"chunk {i}"
        # The pieces whose first replica was m1's failed there and were read from the other.
        m1 = {m["entry"]["id"]: m for m in c.status()["members"]}["m1"]
        assert m1["errors"] >= 1 and not m1["healthy"], m1
        # A put needs every replica: one on m1's stripes fails naming it.
        with pytest.raises(gdrstore.Error, match="m1"):
            c.put(pattern(MiB, 1), "rep", 0)


def test_a_members_file_cluster_stripes_over_the_daemons_it_lists(tmp_path):
    daemons = []
    try:
        for _ in range(2):
            daemons.append(Daemon("--volume", "vol0=16MiB"))
        unit = 64 * 1024
        size = 2 * 16 * MiB
        path = tmp_path / "cluster.json"
        path.write_text(json.dumps({
            "members": [{"id": f"f{i}", "address": d.address,
                         "volumes": [{"name": "vol0", "size": str(16 * MiB)}]}
                        for i, d in enumerate(daemons)],
            "volumes": [{"name": "vol0", "stripe_unit": str(unit), "members": ["f0", "f1"],
                         "replicas": 1, "epoch": "1", "size": str(size)}]}))
        with gdrstore.Cluster(members_file=path) as c:
            src = pattern(size - 7, 9)
            assert c.put(src, "vol0", 7) == size - 7
            back = unaligned(size - 7)
            c.get("vol0", 7, into=back)
            assert np.array_equal(back, src)
            # Stripe k lies on member k % 2 at (k // 2) * unit: check on each daemon directly.
            logical = np.concatenate([np.zeros(7, dtype=np.uint8), src])
            for i, d in enumerate(daemons):
                with gdrstore.Client(d.address) as direct:
                    got = np.zeros(4 * unit, dtype=np.uint8)
                    direct.get("vol0", 0, into=got)
                    for row in range(1, 4):
                        k = 2 * row + i
                        assert np.array_equal(got[row * unit:(row + 1) * unit],
                                              logical[k * unit:(k + 1) * unit]), (i, row)
            s = c.status()
            assert s["source"] == str(path)
            assert all(m["present"] and m["healthy"] for m in s["members"])
            with pytest.raises(gdrstore.FailedPrecondition, match="members file"):
                c.create_volume("vol0", stripe_unit=unit)
            with pytest.raises(gdrstore.OutOfRange):
                c.get("vol0", size - 1, into=bytearray(2))
    finally:
        for d in daemons:
            d.stop()


def test_bad_input_is_refused_naming_what_is_wrong(tmp_path):
    with pytest.raises(gdrstore.InvalidArgument, match="etcd//127.0.0.1:2379/p"):
        gdrstore.Cluster(etcd="etcd//127.0.0.1:2379/p")
    with pytest.raises(gdrstore.InvalidArgument, match="http://"):
        gdrstore.Cluster(etcd="http://127.0.0.1:2379/p")
    with pytest.raises(gdrstore.InvalidArgument, match="exactly one"):
        gdrstore.Cluster()
    with pytest.raises(gdrstore.InvalidArgument, match="exactly one"):
        gdrstore.Cluster(etcd="etcd://127.0.0.1:2379/p", members_file="x.json")
    missing = tmp_path / "missing.json"
    with pytest.raises(gdrstore.NotFound, match=str(missing)):
        gdrstore.Cluster(members_file=missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"members": [{"id": "a", "address": "nowhere"}]}')
    with pytest.raises(gdrstore.InvalidArgument, match="address"):
        gdrstore.Cluster(members_file=broken)
    with pytest.raises(gdrstore.InvalidArgument, match="carrier-pigeon"):
        gdrstore.Cluster(members_file=broken, transport="carrier-pigeon")
    # etcd that refuses connections: the error names the endpoint.
    with socket.socket() as held:  # bound, never listening
        held.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises((gdrstore.Unavailable, gdrstore.DeadlineExceeded), match=address):
            gdrstore.Cluster(etcd=f"etcd://{address}/p", etcd_timeout=1)


def test_bad_ops_and_volumes_are_refused_naming_what_is_wrong(members):
    with members.open() as c:
        a = np.zeros(4096, dtype=np.uint8)
        with pytest.raises(gdrstore.NotFound, match="nosuch"):
            c.get("nosuch", 0, into=a)
        with pytest.raises(gdrstore.InvalidArgument, match="stripe_unit 3"):
            c.create_volume("vol0", stripe_unit=3)
        with pytest.raises(gdrstore.InvalidArgument, match="empty entry"):
            c.create_volume("vol0", members="m0,,m1")
        with pytest.raises(gdrstore.FailedPrecondition, match="nosuch"):
            c.create_volume("vol0", members=["m0", "nosuch"])
        with pytest.raises(gdrstore.FailedPrecondition, match="serves no volume 'other'"):
            c.create_volume("other")
        c.create_volume("vol0")
        with pytest.raises(gdrstore.InvalidArgument, match="offset -1"):
            c.get("vol0", -1, into=a)
        with pytest.raises(gdrstore.InvalidArgument, match="length 4097"):
            c.get("vol0", 0, into=a, length=4097)
        frozen = np.zeros(16, dtype=np.uint8)
        frozen.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            c.get("vol0", 0, into=frozen)
        c.put(frozen, "vol0", 0)  # a put only reads it
        with pytest.raises(gdrstore.OutOfRange):
            c.get("vol0", 3 * 64 * MiB - 1, into=a)


def test_torch_cpu_tensors_move_through_the_cluster(members):
    torch = pytest.importorskip("torch", reason="torch is not installed for this python")
    with members.open() as c:
        c.create_volume("vol0", stripe_unit=MiB)
        t = torch.arange(3 * MiB + 5, dtype=torch.uint8)
        c.put(t, "vol0", 777)
        u = torch.zeros_like(t)
        c.get("vol0", 777, into=u)
        assert torch.equal(t, u)


def test_volumes_made_on_the_members_and_deleted_with_them(members):
    with members.open() as c:
        layout = c.create_volume("made", stripe_unit=4 * MiB, replicas=2, size=10 * MiB)
        # 10 MiB over 3 members: one row of 3 units (12 MiB); each member holds 2 replicas.
        assert int(layout["size"]) == 12 * MiB and layout["replicas"] == 2
        for d in members.daemons:
            with gdrstore.Client(d.address) as dc:
                sizes = {v["name"]: int(v["size"]) for v in dc.info()["volumes"]}
                assert sizes["made"] == 2 * 4 * MiB
        data = pattern(12 * MiB, 7)
        c.put(data, "made", 0)
        back = np.zeros(12 * MiB, dtype=np.uint8)
        assert c.get("made", 0, back, 6 * MiB, at=6 * MiB) == 6 * MiB
        assert (back[6 * MiB:] == data[:6 * MiB]).all() and not back[:6 * MiB].any()
        with pytest.raises(gdrstore.AlreadyExists):
            c.create_volume("made", size=MiB)
        c.delete_volume("made", member_volumes=True)
        with pytest.raises(gdrstore.NotFound):
            c.get("made", 0, back)
        for d in members.daemons:
            with gdrstore.Client(d.address) as dc:
                assert "made" not in [v["name"] for v in dc.info()["volumes"]]
        with pytest.raises(gdrstore.NotFound):
            c.delete_volume("made")


def test_a_member_that_refuses_is_named_and_the_others_undone(members):
    with gdrstore.Client(members.daemons[1].address) as m1:
        m1.create_volume("taken", MiB)  # m1 has it already: making it there is refused
    with members.open() as c:
        with pytest.raises(gdrstore.AlreadyExists, match="member m1 did not make volume 'taken'"):
            c.create_volume("taken", size=3 * 4 * MiB)
        for i in (0, 2):
            with gdrstore.Client(members.daemons[i].address) as dc:
                assert "taken" not in [v["name"] for v in dc.info()["volumes"]]


def test_a_workload_on_a_cluster_stripes_its_volumes_over_the_members(members):
    from gdrstore import workload
    from gdrstore.workload import checkpoint, kvcache
    members.open().close()  # every member registered
    t = workload.Target(cluster=members.url)
    r = checkpoint.run(checkpoint.CheckpointConfig(
        model=checkpoint.model_named("llama3-8b"), target=t, ranks=2, scale=0.0002,
        writes=1, reads=1, interval_s=0.0, chunk=4 * MiB, prefix="wl-cl"))
    assert r["read"]["per_checkpoint"][0]["bytes"] == r["checkpoint_bytes"]
    k = kvcache.run(kvcache.KvConfig(model=kvcache.model_named("qwen2.5-7b"), target=t,
                                     requests=20, prefixes=2, prefix_tokens=64, prefix="wl-clkv"))
    assert k["hit_rate"] > 0
    with members.open() as c:
        assert [v["name"] for v in c.status()["volumes"]] == []
    for d in members.daemons:
        with gdrstore.Client(d.address) as dc:
            assert not [v["name"] for v in dc.info()["volumes"] if v["name"].startswith("wl-")]
    with pytest.raises(gdrstore.InvalidArgument, match="--file with --cluster"):
        checkpoint.run(checkpoint.CheckpointConfig(
            model=checkpoint.model_named("llama3-8b"), target=t, file=True, scale=0.0001))


def test_a_cluster_stream_is_the_c_abis_stream_on_the_cluster_handle(members):
    with members.open() as c:
        size = int(c.create_volume("streamed", 16 * MiB, stripe_unit=MiB, replicas=2)["size"])
        src = pattern(8 * MiB, 21)
        with c.stream() as st:
            assert isinstance(st, gdrstore.Stream)  # no thread pool of blocking ops any more
            puts = [st.put(src, "streamed", i * 2 * MiB + 3, 2 * MiB, at=i * 2 * MiB)
                    for i in range(4)]
            assert [f.result() for f in puts] == [2 * MiB] * 4
            assert all(f.result().path for f in puts), [f.result().path for f in puts]
        back = unaligned(8 * MiB)
        with c.stream() as st:
            gets = [st.get("streamed", i * 2 * MiB + 3, back, 2 * MiB, at=i * 2 * MiB)
                    for i in range(4)]
            past = st.get("streamed", size - 1, bytearray(2))  # its failure is its Future's
            st.wait_all()
        assert [f.result() for f in gets] == [2 * MiB] * 4
        assert np.array_equal(back, src)
        with pytest.raises(gdrstore.OutOfRange):
            past.result()
        # sync puts reach every replica through the same C call as a Client's.
        assert c.put(src[:4096], "streamed", 0, sync=True) == 4096
        st = c.stream()
    # The Cluster's close ended its stream: new ops are refused, naming why.
    with pytest.raises(gdrstore.FailedPrecondition, match="closed"):
        st.put(src, "streamed", 0, 4096)
