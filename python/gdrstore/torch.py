"""safetensors files in and out of the store, straight into (and out of) the tensors' memory.

    import gdrstore, gdrstore.torch
    c = gdrstore.Client("127.0.0.1:50051", transport="auto")
    sd = gdrstore.torch.load_safetensors(c, "llama/model-00001-of-00004.safetensors",
                                         device="cuda")
    gdrstore.torch.save_safetensors(sd, c, "ckpt/step-100/rank0.safetensors")

A file is served as a volume (gdrstored --volume-dir, or any volume holding its bytes). Loading
reads the header, checks every entry against the volume before any tensor is made, allocates one
arena per device (each tensor a view into it, at its offset in the file; a tensor whose offset
does not suit its dtype gets its own allocation) and fills it with gets of the file's data on a
Stream, in place. Saving makes a volume of the file's size (a file in the daemon's writable
--volume-dir by default) and puts the header and every tensor's bytes from where they lie, GPU
memory included. The file format is safetensors' own (8-byte little-endian header length, a
JSON header, the data); what safetensors itself loads, this loads, and what this saves,
safetensors loads.
"""

import json
import math
import struct
from typing import Any, Dict, List, Optional, Tuple

import torch

from .client import Client
from .cluster import Cluster
from .errors import AlreadyExists, FailedPrecondition, InvalidArgument

# safetensors' own bound on the header (its Rust loader refuses larger ones).
MAX_HEADER_BYTES = 100_000_000
# Gets of the data region are cut into pieces of at most this much (and at most the daemon's
# largest op).
CHUNK_BYTES = 64 << 20

_DTYPES: Dict[str, Tuple[Optional[torch.dtype], int]] = {}
for _name, _attr, _size in [
        ("F64", "float64", 8), ("F32", "float32", 4), ("F16", "float16", 2),
        ("BF16", "bfloat16", 2), ("I64", "int64", 8), ("I32", "int32", 4), ("I16", "int16", 2),
        ("I8", "int8", 1), ("U8", "uint8", 1), ("BOOL", "bool", 1), ("U16", "uint16", 2),
        ("U32", "uint32", 4), ("U64", "uint64", 8), ("F8_E4M3", "float8_e4m3fn", 1),
        ("F8_E5M2", "float8_e5m2", 1)]:
    # A dtype this torch lacks stays known (so the error names it) but cannot be loaded.
    _DTYPES[_name] = (getattr(torch, _attr, None), _size)
_NAMES = {t: n for n, (t, _) in _DTYPES.items() if t is not None}


class _Entry:
    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, shape, begin, end


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument(message)


def header_length(first8: bytes, volume_size: int) -> int:
    """The header's length from the file's first 8 bytes, checked against the volume's size.
    InvalidArgument naming byte 0 otherwise."""
    if volume_size < 8 or len(first8) < 8:
        raise _bad(f"byte 0: a safetensors file starts with an 8-byte header length; the volume "
                   f"holds {volume_size} bytes")
    (n,) = struct.unpack("<Q", first8[:8])
    most = min(MAX_HEADER_BYTES, volume_size - 8)
    if n < 2 or n > most:
        raise _bad(f"byte 0: header length {n} is not within 2..{most} (the volume holds "
                   f"{volume_size} bytes)")
    return n


def parse_header(raw: bytes, volume_size: int) -> Tuple[int, List[_Entry], Dict[str, str]]:
    """Checks a safetensors header against a volume of `volume_size` bytes. `raw` is the file's
    first 8 + header-length bytes. Returns the data region's start, the entries (by file
    offset) and the metadata. InvalidArgument naming the byte offset in the file of what is
    wrong."""
    n = header_length(raw, volume_size)
    if len(raw) < 8 + n:
        raise ValueError(f"parse_header needs the file's first {8 + n} bytes, not {len(raw)}")
    text = raw[8:8 + n]
    try:
        header = json.loads(text.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise _bad(f"byte {8 + e.start}: the header is not UTF-8") from None
    except json.JSONDecodeError as e:
        # The decoder's position counts characters; before the error they are the bytes' own
        # unless the header is not ASCII, when it is near.
        raise _bad(f"byte {8 + e.pos}: the header is not JSON: {e.msg}") from None
    if not isinstance(header, dict):
        raise _bad("byte 8: the header is not a JSON object")
    data_start = 8 + n
    data_len = volume_size - data_start
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise _bad("byte 8: __metadata__ must map strings to strings")
    entries = []
    for name, e in header.items():
        where = f"header (byte 8) entry {name!r}"
        if not isinstance(e, dict):
            raise _bad(f"{where}: not an object")
        dtype = e.get("dtype")
        if dtype not in _DTYPES:
            raise _bad(f"{where}: dtype {dtype!r} is not a safetensors dtype "
                       f"({', '.join(sorted(_DTYPES))})")
        shape = e.get("shape")
        if (not isinstance(shape, list) or
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise _bad(f"{where}: shape {shape!r} is not a list of sizes >= 0")
        offsets = e.get("data_offsets")
        if (not isinstance(offsets, list) or len(offsets) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
            raise _bad(f"{where}: data_offsets {offsets!r} is not [begin, end]")
        begin, end = offsets
        if not 0 <= begin <= end <= data_len:
            raise _bad(f"{where}: data_offsets [{begin}, {end}] (file bytes {data_start + begin}"
                       f"..{data_start + end}) are not within the data region of {data_len} "
                       f"bytes from byte {data_start}")
        size = _DTYPES[dtype][1]
        if math.prod(shape) * size != end - begin:
            raise _bad(f"{where}: shape {shape} of {dtype} is {math.prod(shape) * size} bytes, "
                       f"but data_offsets [{begin}, {end}] hold {end - begin}")
        entries.append(_Entry(name, dtype, shape, begin, end))
    entries.sort(key=lambda x: (x.begin, x.end))
    for a, b in zip(entries, entries[1:]):
        if b.begin < a.end:
            raise _bad(f"header (byte 8): tensors {a.name!r} and {b.name!r} overlap at file byte "
                       f"{data_start + b.begin}")
    return data_start, entries, metadata


def _volume_size(store, volume: str) -> Tuple[int, int]:
    """The volume's size and the largest op the daemon takes (0: unknown)."""
    if isinstance(store, Cluster):
        for v in store.status().get("volumes", []):
            if v.get("name") == volume:
                return int(v.get("size", 0)), 0
        raise InvalidArgument(f"cluster has no volume {volume!r}")
    info = store.info()
    limit = int(info.get("limits", {}).get("max_op_bytes", 0) or 0)
    for v in info.get("volumes", []):
        if v.get("name") == volume:
            return int(v.get("size", 0)), limit
    raise InvalidArgument(f"the daemon shows no volume {volume!r} "
                          f"({', '.join(v.get('name', '') for v in info.get('volumes', []))})")


def _get(store, volume: str, offset: int, into) -> None:
    store.get(volume, offset, into=into)


def _host_bytes(store, n: int):
    """Host memory for `n` bytes that every transport takes: a Client's own allocation (the
    local transport and the agent refuse memory the caller owns, rather than copy it)."""
    return store.allocate(n) if isinstance(store, Client) else bytearray(n)


def load_safetensors(store, volume: str, device="cpu", *, paths: Optional[set] = None
                     ) -> Dict[str, torch.Tensor]:
    """The state dict of the safetensors file in `volume`, every tensor on `device` ("cpu",
    "cuda", "cuda:1", a torch.device), filled in place by gets from `store` (a Client or a
    Cluster). Identical, tensor for tensor, to safetensors.torch.load_file of the same file.
    `paths`, a set, collects the path each get of the data took ("local/cuda-ipc"; a Client's
    only). InvalidArgument naming the file offset of a malformed header; the store's errors
    as raised by get."""
    device = torch.device(device)
    size, max_op = _volume_size(store, volume)
    head = _host_bytes(store, 8)
    if size >= 8:
        _get(store, volume, 0, head)
    raw = _host_bytes(store, 8 + header_length(bytes(head), size))
    _get(store, volume, 0, raw)
    data_start, entries, _ = parse_header(bytes(raw), size)
    for e in entries:
        if _DTYPES[e.dtype][0] is None:
            raise InvalidArgument(f"entry {e.name!r}: dtype {e.dtype} has no torch dtype in torch "
                                  f"{torch.__version__}")
    total = max((e.end for e in entries), default=0)
    if device.type == "cpu" and isinstance(store, Client) and total:
        # Host tensors in the client's own (shareable) memory, which every transport takes.
        arena = torch.frombuffer(store.allocate(total), dtype=torch.uint8)
    else:
        arena = torch.empty(total, dtype=torch.uint8, device=device)
    out: Dict[str, torch.Tensor] = {}
    if total:
        chunk = CHUNK_BYTES if max_op <= 0 else min(CHUNK_BYTES, max_op)
        # Only the bytes tensors hold: gaps between them (a writer's padding) are not read.
        spans = _merged((e.begin, e.end) for e in entries if e.end > e.begin)
        pieces = [(a, min(a + chunk, b)) for a0, b in spans for a in range(a0, b, chunk)]
        if isinstance(store, Client):
            store.register(arena)  # every piece below lies in this one registration
            with store.stream() as s:
                for a, b in pieces:
                    s.get(volume, data_start + a, arena[a:b])
                for f in s.wait_all():
                    moved = f.result()
                    if paths is not None:
                        paths.add(moved.path)
        else:
            for a, b in pieces:
                _get(store, volume, data_start + a, arena[a:b])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    for e in sorted(entries, key=lambda x: x.name):
        dtype, itemsize = _DTYPES[e.dtype]
        piece = arena[e.begin:e.end]
        if e.begin % itemsize != 0:
            piece = piece.clone()  # its own allocation, aligned for the dtype
        out[e.name] = piece.view(dtype).reshape(e.shape)
    return out


def _merged(spans):
    merged: List[List[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [tuple(m) for m in merged]


def _header_bytes(state_dict: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]]
                  ) -> Tuple[bytes, List[Tuple[str, torch.Tensor, int]]]:
    header: Dict[str, Any] = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise InvalidArgument("metadata must map strings to strings")
        header["__metadata__"] = dict(metadata)
    layout = []
    offset = 0
    # Larger elements first, then by name: every tensor starts aligned for its dtype.
    order = sorted(state_dict.items(), key=lambda kv: (-kv[1].element_size(), kv[0]))
    for name, t in order:
        if not isinstance(name, str) or name == "__metadata__":
            raise InvalidArgument(f"tensor name {name!r} is not a str (or is reserved)")
        if not isinstance(t, torch.Tensor):
            raise InvalidArgument(f"{name!r} is a {type(t).__name__}, not a tensor")
        if t.dtype not in _NAMES:
            raise InvalidArgument(f"{name!r}: dtype {t.dtype} has no safetensors name")
        n = t.numel() * t.element_size()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + n]}
        layout.append((name, t, offset))
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as safetensors writes it
    return struct.pack("<Q", len(text)) + text, layout


def save_safetensors(state_dict: Dict[str, torch.Tensor], client: Client, volume: str, *,
                     metadata: Optional[Dict[str, str]] = None, file: bool = True,
                     overwrite: bool = False) -> int:
    """Writes `state_dict` as a safetensors file into a new volume `volume` of exactly the
    file's size (with `file`, a file in the daemon's writable --volume-dir at the path the
    name spells, which safetensors.torch.load_file reads back as it is). Tensors are put from
    where they lie (GPU memory included; a non-contiguous one is made contiguous first); host
    tensors over the local transport or the agent, which refuse memory the caller owns, go
    from a copy in the client's own memory.
    AlreadyExists when the volume exists, unless `overwrite` (it is deleted, with its file,
    and made again). Returns the file's size."""
    head, layout = _header_bytes(state_dict, metadata)
    total = len(head) + sum(t.numel() * t.element_size() for _, t, _ in layout)
    try:
        client.create_volume(volume, total, file=file)
    except AlreadyExists:
        if not overwrite:
            raise
        client.delete_volume(volume, delete_file=file)
        client.create_volume(volume, total, file=file)
    first = client.allocate(len(head))
    first[:] = head
    client.put(first, volume, 0)
    held = []  # each put's memory lives until the op is answered
    with client.stream() as s:
        for name, t, offset in layout:
            if t.numel() == 0:
                continue
            flat = t.detach().contiguous().view(-1).view(torch.uint8)
            try:
                s.put(flat, volume, len(head) + offset)
            except FailedPrecondition:
                # Host memory the caller owns: the local transport and the agent take only the
                # client's own (it is refused, not copied, at registration), so it goes from a
                # copy there; tcp and rc put it in place.
                flat = torch.frombuffer(client.allocate(flat.numel()), dtype=torch.uint8)
                flat.copy_(t.detach().contiguous().view(-1).view(torch.uint8))
                s.put(flat, volume, len(head) + offset)
            held.append(flat)
        for f in s.wait_all():
            f.result()
    return total
