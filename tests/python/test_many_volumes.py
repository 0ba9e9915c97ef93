"""A daemon whose volume list is past gRPC's 4 MiB message limit: 10,000 --volume-dir files with
240-character names, about 5 MB of GetInfo. info() lists every one (the daemon's pages joined),
info(volume=...) that one alone, stats() every volume, transport "auto" connects and moves
bytes, and gdrstore.torch.load_safetensors reads a file served among them."""

import json
import os
import pathlib
import shutil
import struct
import tempfile

import pytest

import gdrstore
from conftest import Daemon

N = 10000


def name_of(i):
    return f"{i:05d}-" + "n" * 234  # 240 characters, in name order by index


@pytest.fixture(scope="module")
def many():
    # On tmpfs where the host has one: 10,000 files are made there in well under a second, and
    # take seconds on a busy disk.
    root = pathlib.Path(tempfile.mkdtemp(prefix="gdrstore-many-",
                                         dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        for i in range(N):
            (root / name_of(i)).write_bytes(b"x")
        # A safetensors file among them: two float32 tensors, by the format's rules.
        values = struct.pack("<6f", 1.5, -2.0, 3.25, 0.0, 7.0, -0.5)
        header = json.dumps({
            "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}).encode()
        header += b" " * (-len(header) % 8)
        (root / "zz-model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header +
                                                    values)
        d = Daemon("--volume-dir", str(root), "--max-volumes", "20000")
        yield d
        d.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_info_lists_every_volume(many):
    with gdrstore.Client(many.address) as c:
        info = c.info()
    names = [v["name"] for v in info["volumes"]]
    assert names == [name_of(i) for i in range(N)] + ["zz-model.safetensors"]
    assert "next_volumes_after" not in info
    assert int(info["limits"]["max_op_bytes"]) > 0


def test_info_of_one_volume(many):
    with gdrstore.Client(many.address) as c:
        one = c.info(volume=name_of(1234))
        assert [v["name"] for v in one["volumes"]] == [name_of(1234)]
        assert int(one["volumes"][0]["size"]) == 1
        assert "volumes" not in c.info(volume="no-such-volume")
        with pytest.raises(gdrstore.InvalidArgument, match="not a volume name"):
            c.info(volume="../escape")
        with pytest.raises(gdrstore.InvalidArgument, match="empty"):
            c.info(volume="")


def test_stats_lists_every_volume(many):
    with gdrstore.Client(many.address) as c:
        stats = c.stats()
    assert len(stats["volumes"]) == N + 1
    assert stats["volumes"][-1]["name"] == "zz-model.safetensors"


def test_transport_auto_connects_and_gets(many):
    with gdrstore.Client(many.address, transport="auto") as c:
        buf = c.allocate(1)
        assert c.get(name_of(N - 1), 0, into=buf) == 1
        assert bytes(buf) == b"x"


def test_load_safetensors_among_many_volumes(many):
    torch = pytest.importorskip("torch", reason="torch (Debian's python3-torch) is not installed")
    import gdrstore.torch as gt

    with gdrstore.Client(many.address) as c:
        sd = gt.load_safetensors(c, "zz-model.safetensors")
        with pytest.raises(gdrstore.InvalidArgument, match="shows no volume 'absent'"):
            gt.load_safetensors(c, "absent")
    assert torch.equal(sd["a"], torch.tensor([[1.5, -2.0], [3.25, 0.0]]))
    assert torch.equal(sd["b"], torch.tensor([7.0, -0.5]))
