"""Repeating memory volumes (--volume NAME=SIZE,repeat=R; Admin CreateVolume's repeat, through
Client.create_volume): SIZE bytes of address range over R bytes of the daemon's memory, byte o
reading as the pattern's byte o mod R. Against a real gdrstored on loopback."""

import pytest

import gdrstore
from conftest import Daemon
from gdrstore.workload import repeat as dataset_repeat, train
from gdrstore.workload.target import Target, Volumes

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(scope="module")
def d():
    daemon = Daemon("--volume", "big=256MiB,repeat=1MiB", "--volume", "plain=4MiB")
    yield daemon
    daemon.stop()


@pytest.fixture
def c(d):
    with gdrstore.Client(d.address) as client:
        yield client


def test_a_volume_from_the_start_repeats_and_says_so(c):
    (v,) = c.volumes("big")
    assert v["size"] == 256 * MiB and v["backing"] == f"memory,repeat={MiB}"
    assert c.volumes("plain")[0]["backing"] == "memory"
    buf = bytearray(64 << 10)
    # Across the boundary of the first period and the second, and far into the range.
    for offset in (MiB - (32 << 10), 200 * MiB + 12345):
        c.get("big", offset, buf)
        gdrstore.verify(buf, "big", offset, repeat=MiB)
    with pytest.raises(gdrstore.DataLoss):  # what a volume holding every byte would show
        gdrstore.verify(buf, "big", 200 * MiB + 12345)
    with pytest.raises(gdrstore.DataLoss, match="differs from big"):
        gdrstore.verify(buf, "big", 200 * MiB + 12346, repeat=MiB)


def test_a_put_shows_in_every_period(c):
    c.create_volume("alias", 16 * MiB, repeat=MiB)
    try:
        src = bytes(range(256)) * 16
        c.put(src, "alias", 3 * MiB + 4096)
        back = bytearray(len(src))
        for period in (0, 1, 15):
            c.get("alias", period * MiB + 4096, back)
            assert bytes(back) == src
    finally:
        c.delete_volume("alias")


def _mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def test_memory_limits_count_the_memory_held(c):
    if _mem_available() >= 1 << 40:
        pytest.skip("this host has 1 TiB of memory available: a plain 1 TiB volume would fit")
    # Past the memory this host has: refused plain, made when it repeats.
    with pytest.raises(gdrstore.ResourceExhausted, match="does not fit"):
        c.create_volume("huge", 1 << 40)
    c.create_volume("huge", 1 << 40, repeat=64 * MiB)
    try:
        buf = bytearray(4096)
        c.get("huge", (1 << 40) - 4096, buf)
        gdrstore.verify(buf, "huge", (1 << 40) - 4096, repeat=64 * MiB)
    finally:
        c.delete_volume("huge")


@pytest.mark.parametrize("size, kwargs, needle", [
    (16 * MiB, dict(repeat=0), "repeat 0 must be"),
    (16 * MiB, dict(repeat=-MiB), "repeat -1048576 must be"),
    (16 * MiB, dict(repeat=True), "repeat True must be"),
    (16 * MiB, dict(repeat="1MiB"), "repeat '1MiB' must be"),
    (16 * MiB, dict(repeat=100), "multiple of the page size"),
    (16 * MiB, dict(repeat=3 * MiB), "must divide the volume's size"),
    (16 * MiB, dict(repeat=32 * MiB), "must divide the volume's size"),
    (16 * GiB, dict(repeat=4096), "at most 16384"),
    (16 * MiB, dict(repeat=MiB, file=True), "repeat is for memory volumes"),
    (16 * MiB, dict(media="repeat=1MiB", repeat=MiB), "'repeat' given twice"),
    (16 * MiB, dict(media="repeat=x"), "repeat 'x' must be a SIZE"),
    (16 * MiB, dict(media="file=/tmp/x"), "file= is not taken here"),
])
def test_bad_repeats_are_refused_by_name(c, size, kwargs, needle):
    with pytest.raises(gdrstore.InvalidArgument, match=needle):
        c.create_volume("bad", size, **kwargs)
    assert c.volumes("bad") == []


def test_verify_refuses_bad_repeat_arguments():
    with pytest.raises(gdrstore.InvalidArgument, match="repeat 0"):
        gdrstore.verify(bytearray(8), "big", 0, repeat=0)
    with pytest.raises(gdrstore.InvalidArgument, match="offset -1"):
        gdrstore.verify(bytearray(8), "big", -1, repeat=MiB)


def test_a_workload_dataset_volume_repeats(d):
    target = Target(daemons=[d.address])
    with Volumes(target, file=False, media=None) as vols:
        vols.make(0, "wl-rep", 64 * MiB, repeat=4 * MiB)
        path = target.path()
        try:
            buf = bytearray(MiB)
            for offset in (0, 4 * MiB - 4096, 63 * MiB):
                path.client(0).get("wl-rep", offset, buf)
                gdrstore.verify(buf, "wl-rep", offset, repeat=4 * MiB)
        finally:
            path.close()
    with gdrstore.Client(d.address) as c:
        assert c.volumes("wl-rep") == []  # taken away with the run
    with Volumes(target, file=True, media=None) as vols:
        with pytest.raises(gdrstore.InvalidArgument, match="memory volumes"):
            vols.make(0, "wl-rep-file", 64 * MiB, repeat=4 * MiB)


def _tiny_train(d, **kw):
    """unet3d's loader at a tiny scale: 64 KiB samples, batch 2, one rank, one epoch."""
    model = train.model_with("unet3d", sample_bytes=64 << 10, sample_stdev=0,
                             samples_per_file=1, batch=2, compute_s=0.001, read_threads=2)
    given = dict(model=model, target=Target(daemons=[d.address]), epochs=1, scale=0.02,
                 client_memory=MiB, prefix="wl-rep")
    given.update(kw)
    return train.TrainConfig(**given)


def test_train_reads_a_repeating_dataset_and_names_it(d):
    r = train.run(_tiny_train(d, repeat=256 << 10))
    (vol,) = r["volumes"]
    assert r["dataset_bytes"] > 4 * (256 << 10)  # samples lie in several periods
    assert r["repeat_bytes"] == 256 << 10 and not r["closed"]
    assert any(x.startswith("data repeat every 262144 B") for x in r["deviations"])
    rank = r["per_rank"][0]
    assert rank["samples_verified"] == r["steps_per_epoch"] * 2 and rank["samples_verified"] > 0
    plain = train.run(_tiny_train(d, repeat=0))
    assert plain["repeat_bytes"] is None
    assert not any(x.startswith("data repeat") for x in plain["deviations"])


@pytest.mark.parametrize("repeat, needle", [
    (-4096, "--repeat -4096 is not a byte count"),
    (True, "--repeat True is not a byte count"),
    (1000, "not a positive multiple of 4 KiB"),
    (4096, "at most 16384: give at least"),
])
def test_train_refuses_bad_repeats_by_name(d, repeat, needle):
    # 80 MiB of samples: past 16384 periods of 4 KiB.
    cfg = _tiny_train(d, repeat=repeat, scale=1.0, client_memory=16 * MiB)
    with pytest.raises(gdrstore.InvalidArgument, match=needle):
        train.run(cfg)


def test_train_repeats_a_dataset_the_daemon_cannot_hold(d):
    # The closed datasize rule for this host's free memory: 5x what the daemon could hold.
    with open("/proc/meminfo") as f:
        free = next(int(x.split()[1]) * 1024 for x in f if x.startswith("MemAvailable:"))
    model = train.model_with("unet3d", sample_bytes=64 * MiB, sample_stdev=0,
                             samples_per_file=1, batch=1, compute_s=0.001, read_threads=1)
    r = train.run(train.TrainConfig(model=model, target=Target(daemons=[d.address]), epochs=1,
                                    steps=2, client_memory=free, prefix="wl-rep-auto"))
    assert r["dataset_bytes"] > free
    assert r["repeat_bytes"] == dataset_repeat.auto_repeat(train.lay_out(train.TrainConfig(
        model=model, target=Target(daemons=[d.address]), epochs=1, steps=2,
        client_memory=free)))
    assert any(x.startswith("data repeat every") for x in r["deviations"])
    assert r["per_rank"][0]["samples_verified"] == 2
