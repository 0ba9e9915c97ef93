"""safetensors in and out of a real gdrstored (gdrstore.torch): a file written by the format's
rules and served from a --volume-dir loads tensor for tensor; a state dict saved into a volume
made at run time lands as a file that loads back the same (and, where the safetensors package
is installed, that safetensors itself loads); malformed headers are refused naming the file
offset; volumes are made, listed and deleted from Python."""

import json
import os
import shutil
import struct
import tempfile

import pytest

torch = pytest.importorskip("torch", reason="torch (Debian's python3-torch) is not installed")

import gdrstore  # noqa: E402
import gdrstore.torch as gt  # noqa: E402
from conftest import Daemon  # noqa: E402


def state_dict():
    g = torch.Generator().manual_seed(7)
    return {
        "model.embed.weight": torch.randn(64, 48, generator=g).to(torch.bfloat16),
        "model.layers.0.attn.q": torch.randn(48, 48, generator=g),
        "model.layers.0.norm": torch.randn(48, generator=g).to(torch.float16),
        "model.step": torch.tensor(12345, dtype=torch.int64),
        "model.mask": torch.rand(7, 3, generator=g) > 0.5,
        "model.ids": torch.randint(-100, 100, (5, 5), generator=g, dtype=torch.int32),
        "model.bytes": torch.randint(0, 255, (13,), generator=g, dtype=torch.uint8),
        "model.empty": torch.zeros(0, 4),
        "model.f64": torch.randn(3, 2, generator=g, dtype=torch.float64),
    }


NAMES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
         torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8",
         torch.bool: "BOOL"}


def write_file(path, sd, align_first=True, extra=b""):
    """The format by its rules (8-byte LE length, JSON, data), independently of the module."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in sd.items():
        raw = t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    if align_first:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs) + extra)


def same(a, b):
    assert set(a) == set(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert list(a[k].shape) == list(b[k].shape), k
        # Bit for bit (NaNs included), whatever the layout.
        assert torch.equal(a[k].contiguous().view(-1).view(torch.uint8) if a[k].numel() else a[k],
                           b[k].contiguous().view(-1).view(torch.uint8) if b[k].numel() else b[k]), k


@pytest.fixture(scope="module")
def served():
    root = tempfile.mkdtemp(prefix="gdrstore-st-")
    models, ckpt = os.path.join(root, "models"), os.path.join(root, "ckpt")
    os.makedirs(os.path.join(models, "tiny"))
    os.makedirs(ckpt)
    write_file(os.path.join(models, "tiny", "model.safetensors"), state_dict())
    # Unaligned header: tensors start at offsets that do not suit their dtypes.
    write_file(os.path.join(models, "tiny", "odd.safetensors"), state_dict(), align_first=False)
    bad = {
        "short": b"\x05\x00",
        "huge-length": struct.pack("<Q", 1 << 40) + b"{}",
        "not-json": struct.pack("<Q", 8) + b"{nope!!}",
        "bad-dtype": None,
        "past-end": None,
        "wrong-size": None,
        "overlap": None,
    }
    for name, raw in bad.items():
        path = os.path.join(models, "bad", name + ".safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if raw is None:
            h = {"bad-dtype": {"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}},
                 "past-end": {"a": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}},
                 "wrong-size": {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
                 "overlap": {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                             "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}}[name]
            text = json.dumps(h).encode()
            raw = struct.pack("<Q", len(text)) + text + bytes(8)
        with open(path, "wb") as f:
            f.write(raw)
    d = Daemon("--volume-dir", models, "--volume-dir", ckpt + ",writable", "--volume",
               "vol0=4MiB", "--local-socket", os.path.join(root, "local.sock"))
    yield d, ckpt
    d.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("transport", ["tcp", "local"])
def test_a_served_file_loads_tensor_for_tensor(served, transport):
    d, _ = served
    with gdrstore.Client(d.address, transport=transport) as c:
        same(gt.load_safetensors(c, "tiny/model.safetensors"), state_dict())
        # Tensors at offsets unaligned for their dtype get their own allocation, same values.
        same(gt.load_safetensors(c, "tiny/odd.safetensors"), state_dict())
        with pytest.raises(gdrstore.FailedPrecondition, match="read-only"):
            c.put(c.allocate(8), "tiny/model.safetensors", 0)


@pytest.mark.parametrize("name,says", [
    ("short", r"byte 0: a safetensors file starts"),
    ("huge-length", r"byte 0: header length 1099511627776"),
    ("not-json", r"byte 9: the header is not JSON"),
    ("bad-dtype", r"entry 'a': dtype 'Q9'"),
    ("past-end", r"data_offsets \[0, 64\] \(file bytes"),
    ("wrong-size", r"shape \[3\] of F32 is 12 bytes"),
    ("overlap", r"tensors 'a' and 'b' overlap at file byte"),
])
def test_malformed_headers_are_refused_naming_the_offset(served, name, says):
    d, _ = served
    with gdrstore.Client(d.address) as c:
        with pytest.raises(gdrstore.InvalidArgument, match=says):
            gt.load_safetensors(c, f"bad/{name}.safetensors")
        # The daemon and the client serve on.
        assert c.get("vol0", 0, into=bytearray(4096)) == 4096


@pytest.mark.parametrize("transport", ["tcp", "local"])
def test_a_saved_state_dict_is_a_file_that_loads_back(served, transport):
    d, ckpt = served
    sd = state_dict()
    sd["model.strided"] = torch.arange(20, dtype=torch.float32).view(4, 5).t()  # not contiguous
    with gdrstore.Client(d.address, transport=transport) as c:
        size = gt.save_safetensors(sd, c, "step-1/rank0.safetensors", metadata={"step": "1"})
        path = os.path.join(ckpt, "step-1", "rank0.safetensors")
        assert os.path.getsize(path) == size
        same(gt.load_safetensors(c, "step-1/rank0.safetensors"), sd)
        # The file itself, parsed by the format's rules.
        with open(path, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        assert n % 8 == 0
        header = json.loads(raw[8:8 + n])
        assert header["__metadata__"] == {"step": "1"}
        a, b = header["model.layers.0.attn.q"]["data_offsets"]
        assert raw[8 + n + a:8 + n + b] == sd["model.layers.0.attn.q"].numpy().tobytes()
        try:
            import safetensors.torch as st
        except ImportError:
            st = None
        if st is not None:
            same(st.load_file(path), sd)
        with pytest.raises(gdrstore.AlreadyExists):
            gt.save_safetensors(sd, c, "step-1/rank0.safetensors")
        sd["model.step"] = torch.tensor(2, dtype=torch.int64)
        gt.save_safetensors(sd, c, "step-1/rank0.safetensors", overwrite=True)
        assert gt.load_safetensors(c, "step-1/rank0.safetensors")["model.step"].item() == 2
        c.delete_volume("step-1/rank0.safetensors", delete_file=True)
        assert not os.path.exists(path)


def test_volumes_are_made_listed_and_deleted_from_python(served):
    d, _ = served
    with gdrstore.Client(d.address) as c:
        assert c.create_volume("scratch/a", 1 << 20) is False
        names = {v["name"] for v in c.info()["volumes"]}
        assert "scratch/a" in names
        c.put(bytearray(b"x" * 4096), "scratch/a", 0)
        c.delete_volume("scratch/a")
        with pytest.raises(gdrstore.NotFound):
            c.get("scratch/a", 0, into=bytearray(4096))
        with pytest.raises(gdrstore.InvalidArgument, match="name"):
            c.create_volume("../up", 4096)
        with pytest.raises(ValueError, match="NUL"):
            c.create_volume("a\0b", 4096)
        with pytest.raises(gdrstore.InvalidArgument, match="size"):
            c.create_volume("zero", 0)
        with pytest.raises((OverflowError, ValueError, TypeError)):
            c.create_volume("neg", -1)
        assert c.create_volume("made/file.bin", 8192, file=True) is True
