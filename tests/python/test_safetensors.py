"""safetensors in and out of a real gdrstored (gdrstore.torch): a file written by the format's
rules and served from a --volume-dir loads tensor for tensor; a state dict saved into a volume
made at run time lands as a file that loads back the same (and, where the safetensors package
is installed, that safetensors itself loads); malformed and hostile headers (deep nesting,
long integers, sizes past int64, duplicate keys) are refused as InvalidArgument naming the file
offset, the entry and the field; volumes are made, listed and deleted from Python."""

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


def entry(dtype="U8", shape=(4,), offsets=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def header(**entries):
    return json.dumps(entries).encode()


# Headers that once escaped as Python's own errors (RecursionError, ValueError, RuntimeError,
# TypeError) or loaded silently, each with what the InvalidArgument must name.
HOSTILE = {
    # 100k nested arrays in a shape: byte 8 + len('{"a":') + 2 is the 4th level.
    "deep": (b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
             r"byte 15: the header's JSON nests deeper than the format's 3 levels"),
    "deep-object": (b'{"a":{"shape":{"x":{"y":1}}}}', r"byte 27: the header's JSON nests"),
    "5000-digit-size": (b'{"a":{"dtype":"U8","shape":[1' + b"0" * 4999 +
                        b'],"data_offsets":[0,4]}}',
                        r"entry 'a': shape \[<an integer of 5000 digits>\] is not a list of "
                        r"sizes in \[0, 2\^63\)"),
    "5000-digit-offset": (b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,' + b"9" * 5000 +
                          b']}}', r"entry 'a': data_offsets \[0, <an integer of 5000 digits>\] "
                          r"is not \[begin, end\]"),
    "product-overflow": (header(a=entry(shape=(1 << 32, 1 << 32, 0), offsets=(0, 0))),
                         r"entry 'a': shape \[4294967296, 4294967296, 0\] is 2\^63 elements "
                         r"or more"),
    "product-overflow-strides": (header(a=entry("F32", shape=(0, 1 << 62, 2), offsets=(0, 0))),
                                 r"entry 'a': shape \[0, 4611686018427387904, 2\] is 2\^63"),
    "dim-2-64": (header(a=entry(shape=(0, 1 << 64), offsets=(0, 0))),
                 r"entry 'a': shape \[0, 18446744073709551616\] is not a list of sizes in "
                 r"\[0, 2\^63\)"),
    "dim-2-63": (header(a=entry(shape=(1 << 63, 0), offsets=(0, 0))),
                 r"entry 'a': shape \[9223372036854775808, 0\] is not a list of sizes"),
    "negative-dim": (header(a=entry(shape=(-1, 0), offsets=(0, 0))),
                     r"entry 'a': shape \[-1, 0\] is not a list of sizes"),
    "float-dim": (header(a=entry(shape=(4.0,))), r"entry 'a': shape \[4.0\] is not a list"),
    "string-dim": (header(a=entry(shape=("4",))), r"entry 'a': shape \['4'\] is not a list"),
    "bool-dim": (header(a=entry(shape=(True, 4))), r"entry 'a': shape \[True, 4\] is not"),
    "bool-offsets": (header(a=entry(shape=(1,), offsets=(False, True))),
                     r"entry 'a': data_offsets \[False, True\] is not \[begin, end\]"),
    "offset-2-64": (header(a=entry(shape=(0,), offsets=(1 << 64, 1 << 64))),
                    r"entry 'a': data_offsets \[18446744073709551616, 18446744073709551616\] "
                    r"is not \[begin, end\] of integers in \[0, 2\^64\)"),
    "negative-offset": (header(a=entry(shape=(0,), offsets=(-4, -4))),
                        r"entry 'a': data_offsets \[-4, -4\] is not \[begin, end\]"),
    "offsets-reversed": (header(a=entry(shape=(0,), offsets=(4, 0))),
                         r"entry 'a': data_offsets \[4, 0\] \(file bytes"),
    "overlapping": (header(a=entry(offsets=(0, 4)), b=entry(offsets=(3, 7))),
                    r"tensors 'a' and 'b' overlap at file byte"),
    "duplicate-name": (b'{"a":' + json.dumps(entry(offsets=(0, 4))).encode() + b',"a":' +
                       json.dumps(entry(offsets=(4, 8))).encode() + b"}",
                       r"header \(byte 8\): tensor 'a' appears more than once"),
    "duplicate-field": (b'{"a":{"dtype":"U8","dtype":"F32","shape":[4],"data_offsets":[0,4]}}',
                        r"entry 'a': field 'dtype' appears more than once"),
    "duplicate-metadata": (b'{"__metadata__":{"k":"1"},"__metadata__":{"k":"2"}}',
                           r"header \(byte 8\): __metadata__ appears more than once"),
    "duplicate-metadata-key": (b'{"__metadata__":{"k":"1","k":"2"}}',
                               r"__metadata__ key 'k' appears more than once"),
    "metadata-not-object": (b'{"__metadata__":[]}', r"__metadata__ must map strings to strings"),
    "dtype-list": (header(a=entry(dtype=["F32"])),
                   r"entry 'a': dtype \['F32'\] is not a safetensors dtype"),
    "dtype-missing": (b'{"a":{"shape":[4],"data_offsets":[0,4]}}',
                      r"entry 'a': dtype None is not a safetensors dtype"),
    "shape-missing": (b'{"a":{"dtype":"U8","data_offsets":[0,4]}}',
                      r"entry 'a': shape None is not a list"),
    "nan-size": (b'{"a":{"dtype":"U8","shape":[NaN],"data_offsets":[0,4]}}',
                 r"header \(byte 8\): NaN is not JSON"),
    "lone-surrogate": (b'{"\\ud800":' + json.dumps(entry()).encode() + b"}",
                       r"entry '\\ud800': the name holds a lone surrogate"),
    "not-json-past-unicode": ('{"\u00e9\u00e9":{"dtype":"U8",,}}'.encode(),
                              r"byte 30: the header is not JSON"),
}

# Brackets and escapes inside strings are text, not nesting: these load (no tensors).
TAME = {
    "brackets-in-strings": (b'{"__metadata__":{"k":"[[[[{{{{\\"[[[[","[[":"]]]]"}}', None),
    "escaped-backslash-then-quote": (b'{"__metadata__":{"k":"\\\\","v":"[[[[["}}', None),
}


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
    for name, (text, _) in {**HOSTILE, **TAME}.items():
        path = os.path.join(models, "hostile", name + ".safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + bytes(8))
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


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_headers_are_invalid_argument_naming_the_field(served, name):
    d, _ = served
    with gdrstore.Client(d.address) as c:
        with pytest.raises(gdrstore.InvalidArgument, match=HOSTILE[name][1]):
            gt.load_safetensors(c, f"hostile/{name}.safetensors")
        assert c.get("vol0", 0, into=bytearray(4096)) == 4096


@pytest.mark.parametrize("name", sorted(TAME))
def test_brackets_and_escapes_in_strings_are_not_nesting(served, name):
    d, _ = served
    with gdrstore.Client(d.address) as c:
        assert gt.load_safetensors(c, f"hostile/{name}.safetensors") == {}


def test_a_parsed_header_keeps_its_metadata():
    text = b'{"__metadata__":{"k":"[[[[[\\"","n":"\\u00e9"},"a":' + json.dumps(
        {"dtype": "F32", "shape": [2, 0, 1 << 40], "data_offsets": [0, 0]}).encode() + b"}"
    raw = struct.pack("<Q", len(text)) + text
    start, entries, meta = gt.parse_header(raw, len(raw))
    assert start == len(raw) and meta == {"k": '[[[[["', "n": "\u00e9"}
    assert [(e.name, e.shape, e.begin, e.end) for e in entries] == [("a", [2, 0, 1 << 40], 0, 0)]
    # An empty tensor whose other sizes stay below 2^63 elements is one torch makes.
    text = header(a=entry("F32", shape=(0, (1 << 63) - 1), offsets=(0, 0)))
    raw = struct.pack("<Q", len(text)) + text
    assert gt.parse_header(raw, len(raw))[1][0].shape == [0, (1 << 63) - 1]
    assert torch.empty(0, dtype=torch.float32).reshape([0, (1 << 63) - 1]).numel() == 0


@pytest.mark.parametrize("sd,metadata,says", [
    ({"a": torch.zeros(2)}, [("k", "v")], r"metadata is a list, not a dict"),
    ({"a": torch.zeros(2)}, {"k": 1}, r"metadata 'k': 1: metadata must map strings"),
    ({"a": torch.zeros(2)}, {"k": "\ud800"}, r"metadata 'k': '\\ud800'"),
    ({1: torch.zeros(2), "a": torch.zeros(2)}, None, r"tensor name 1 is not a str"),
    ({"\ud800": torch.zeros(2)}, None, r"tensor name '\\ud800' is not a str of Unicode"),
    ({"__metadata__": torch.zeros(2)}, None, r"tensor name '__metadata__'"),
    ({"a": [1.0, 2.0], "b": torch.zeros(2)}, None, r"'a' is a list, not a tensor"),
    ({"a": torch.zeros(2, dtype=torch.complex64)}, None, r"'a': dtype torch.complex64 has no"),
    ([("a", torch.zeros(2))], None, r"state_dict is a list, not a dict"),
])
def test_a_bad_state_dict_is_refused_before_anything_is_made(served, sd, metadata, says):
    d, ckpt = served
    with gdrstore.Client(d.address) as c:
        with pytest.raises(gdrstore.InvalidArgument, match=says):
            gt.save_safetensors(sd, c, "refused/rank0.safetensors", metadata=metadata)
        assert "refused/rank0.safetensors" not in {v["name"] for v in c.info()["volumes"]}
    assert not os.path.exists(os.path.join(ckpt, "refused"))


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
