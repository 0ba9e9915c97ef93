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
safetensors loads. A header is hostile until checked: every way it can be wrong (nesting, long
integers, sizes past int64, keys given twice, offsets) is an InvalidArgument naming the byte,
the entry and the field, before any tensor is made.

memory_pool(device) gives a torch.cuda.MemPool whose memory the library allocates (VMM,
shareable as a file descriptor, GPUDirect-RDMA capable): tensors made in it cross into a
daemon or the node agent without the host's IPC or PID namespace, and rc/dc register them by
dma-buf (docs/python.md, "GPU memory for pods").
"""

import ctypes
import itertools
import json
import operator
import os
import struct
import threading
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _native
from .store import Store
from .errors import AlreadyExists, FailedPrecondition, InvalidArgument

# safetensors' own bound on the header (its Rust loader refuses larger ones).
MAX_HEADER_BYTES = 100_000_000
# The format's header nests 3 deep (the object, an entry, its shape); deeper JSON is refused
# before it is parsed, as Python's json recurses once per level.
MAX_HEADER_DEPTH = 3
# Sizes and offsets are u64 in the format: 20 digits hold every one, and a longer integer is
# refused as it is (Python would parse it at a cost quadratic in its digits, or refuse past
# 4300 digits with a ValueError).
_MAX_INT_DIGITS = 20
_U64 = 1 << 64
# torch's sizes, strides and element counts are int64.
_I64 = 1 << 63
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


class _Object(dict):
    """A JSON object as parsed: its keys, and the ones given more than once (json keeps the
    last silently)."""
    duplicates: Tuple[str, ...] = ()


def _object(pairs) -> _Object:
    out = _Object(pairs)
    if len(out) != len(pairs):
        seen, dups = set(), []
        for k, _ in pairs:
            if k in seen and k not in dups:
                dups.append(k)
            seen.add(k)
        out.duplicates = tuple(dups)
    return out


class _LongInt:
    """An integer of more digits than any u64: kept as text, refused by the field holding it."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _int(text: str):
    return _LongInt(text) if len(text.lstrip("-")) > _MAX_INT_DIGITS else int(text)


class _NotJson(ValueError):
    pass


def _constant(name: str):
    raise _NotJson(f"{name} is not JSON")


_BRACKETS = bytes.maketrans(b"[]{}", b"\x02\x00\x02\x00")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_SCAN_BYTES = 1 << 20


def _depth_past(text: bytes, limit: int) -> Optional[int]:
    """The offset in `text` (JSON) of the first bracket nested deeper than `limit`; None when
    none is. Brackets in strings do not count. Linear, and in C but for one chunk's walk where
    the limit is passed: a hostile header of the most bytes allowed costs seconds, no more."""
    # Escaped backslashes, then escaped quotes, become plain bytes of the same length: every
    # quote left opens or closes a string, and offsets stay the text's.
    text = text.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    depth, in_string = 0, False
    for at in range(0, len(text), _SCAN_BYTES):
        chunk = text[at:at + _SCAN_BYTES]
        parts = chunk.split(b'"')
        flat = b"".join(parts[1 if in_string else 0::2]).translate(_BRACKETS, _NOT_BRACKETS)
        if flat:
            # Opening brackets are 2, closing 0: the depth after the k-th is (their sum) - k.
            steps = map(operator.sub, itertools.accumulate(flat), itertools.count(1))
            if depth + max(steps) > limit:
                return at + _walk(chunk, depth, in_string, limit)
            depth += 2 * (len(flat) - flat.count(0)) - len(flat)
        if len(parts) % 2 == 0:  # an odd number of quotes: a string runs into the next chunk
            in_string = not in_string
    return None


def _walk(chunk: bytes, depth: int, in_string: bool, limit: int) -> int:
    for i, c in enumerate(chunk):
        if c == 0x22:
            in_string = not in_string
        elif in_string:
            continue
        elif c in b"[{":
            depth += 1
            if depth > limit:
                return i
        elif c in b"]}":
            depth -= 1
    return len(chunk)  # not reached: the caller saw the limit passed in this chunk


def _dims(shape) -> bool:
    return isinstance(shape, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d < _I64 for d in shape)


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a \ud800-style escape
        return False
    return True


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
    offset) and the metadata. InvalidArgument naming the byte offset in the file, the entry
    and the field of what is wrong (never a RecursionError, ValueError or TypeError of a
    hostile header)."""
    n = header_length(raw, volume_size)
    if len(raw) < 8 + n:
        raise ValueError(f"parse_header needs the file's first {8 + n} bytes, not {len(raw)}")
    text = bytes(raw[8:8 + n])
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(f"byte {8 + e.start}: the header is not UTF-8") from None
    deep = _depth_past(text, MAX_HEADER_DEPTH)
    if deep is not None:
        raise _bad(f"byte {8 + deep}: the header's JSON nests deeper than the format's "
                   f"{MAX_HEADER_DEPTH} levels (object, entry, shape)")
    try:
        header = json.loads(decoded, object_pairs_hook=_object, parse_int=_int,
                            parse_constant=_constant)
    except _NotJson as e:
        raise _bad(f"header (byte 8): {e} (NaN and Infinity are Python's, not JSON's)") from None
    except json.JSONDecodeError as e:
        at = 8 + len(decoded[:e.pos].encode("utf-8"))  # the decoder counts characters
        raise _bad(f"byte {at}: the header is not JSON: {e.msg}") from None
    if not isinstance(header, dict):
        raise _bad("byte 8: the header is not a JSON object")
    if header.duplicates:
        name = header.duplicates[0]
        what = "__metadata__" if name == "__metadata__" else f"tensor {name!r}"
        raise _bad(f"header (byte 8): {what} appears more than once")
    data_start = 8 + n
    data_len = volume_size - data_start
    metadata = header.pop("__metadata__", _Object())
    if not isinstance(metadata, dict) or not all(
            isinstance(v, str) and _unicode(k) and _unicode(v) for k, v in metadata.items()):
        raise _bad("header (byte 8): __metadata__ must map strings to strings")
    if metadata.duplicates:
        raise _bad(f"header (byte 8): __metadata__ key {metadata.duplicates[0]!r} appears more "
                   "than once")
    entries = []
    for name, e in header.items():
        where = f"header (byte 8) entry {name!r}"
        if not _unicode(name):
            raise _bad(f"{where}: the name holds a lone surrogate, not Unicode text")
        if not isinstance(e, dict):
            raise _bad(f"{where}: not an object")
        if e.duplicates:
            raise _bad(f"{where}: field {e.duplicates[0]!r} appears more than once")
        dtype = e.get("dtype")
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            raise _bad(f"{where}: dtype {dtype!r} is not a safetensors dtype "
                       f"({', '.join(sorted(_DTYPES))})")
        shape = e.get("shape")
        if not _dims(shape):
            raise _bad(f"{where}: shape {shape!r} is not a list of sizes in [0, 2^63)")
        offsets = e.get("data_offsets")
        if (not isinstance(offsets, list) or len(offsets) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) and 0 <= o < _U64
                        for o in offsets)):
            raise _bad(f"{where}: data_offsets {offsets!r} is not [begin, end] of integers in "
                       "[0, 2^64)")
        begin, end = offsets
        if not begin <= end <= data_len:
            raise _bad(f"{where}: data_offsets [{begin}, {end}] (file bytes {data_start + begin}"
                       f"..{data_start + end}) are not within the data region of {data_len} "
                       f"bytes from byte {data_start}")
        # Zero sizes aside, the sizes multiply to a count torch can hold (its element counts
        # and strides are int64, and an empty tensor has strides too); checked step by step,
        # so a long shape stops at the first step past the bound.
        count = 1
        for d in shape:
            if d:
                count *= d
                if count >= _I64:
                    raise _bad(f"{where}: shape {shape} is 2^63 elements or more (zero sizes "
                               "aside): past torch's int64 sizes and strides")
        nbytes = 0 if 0 in shape else count * _DTYPES[dtype][1]
        if nbytes != end - begin:
            raise _bad(f"{where}: shape {shape} of {dtype} is {nbytes} bytes, "
                       f"but data_offsets [{begin}, {end}] hold {end - begin}")
        entries.append(_Entry(name, dtype, shape, begin, end))
    entries.sort(key=lambda x: (x.begin, x.end))
    for a, b in zip(entries, entries[1:]):
        if b.begin < a.end:
            raise _bad(f"header (byte 8): tensors {a.name!r} and {b.name!r} overlap at file byte "
                       f"{data_start + b.begin}")
    return data_start, entries, metadata


def _volume_size(store: Store, volume: str) -> Tuple[int, int]:
    """The volume's size and the largest op the store takes (0: unknown)."""
    # That volume alone: one small answer however many volumes the store serves.
    info = store.info(volume=volume)
    limit = int(info.get("limits", {}).get("max_op_bytes", 0) or 0)
    for v in info.get("volumes", []):
        if v.get("name") == volume:
            return int(v.get("size", 0)), limit
    raise InvalidArgument(f"the store shows no volume {volume!r}")


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
    # The store's own memory, which every transport takes (the local transport and the agent
    # refuse memory the caller owns rather than copy it).
    head = store.allocate(8)
    if size >= 8:
        store.get(volume, 0, into=head)
    raw = store.allocate(8 + header_length(bytes(head), size))
    store.get(volume, 0, into=raw)
    data_start, entries, _ = parse_header(bytes(raw), size)
    for e in entries:
        if _DTYPES[e.dtype][0] is None:
            raise InvalidArgument(f"entry {e.name!r}: dtype {e.dtype} has no torch dtype in torch "
                                  f"{torch.__version__}")
    total = max((e.end for e in entries), default=0)
    if device.type == "cpu" and total:
        # Host tensors in the store's own (shareable) memory, which every transport takes.
        arena = torch.frombuffer(store.allocate(total), dtype=torch.uint8)
    else:
        arena = torch.empty(total, dtype=torch.uint8, device=device)
    out: Dict[str, torch.Tensor] = {}
    if total:
        chunk = CHUNK_BYTES if max_op <= 0 else min(CHUNK_BYTES, max_op)
        # Only the bytes tensors hold: gaps between them (a writer's padding) are not read.
        spans = _merged((e.begin, e.end) for e in entries if e.end > e.begin)
        pieces = [(a, min(a + chunk, b)) for a0, b in spans for a in range(a0, b, chunk)]
        store.register(arena)  # every piece below lies in this one registration
        with store.stream() as s:
            for a, b in pieces:
                s.get(volume, data_start + a, arena[a:b])
            for f in s.wait_all():
                moved = f.result()
                if paths is not None and moved.path:
                    paths.add(moved.path)
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
    """The file's first bytes (length and header) and where each tensor goes. Everything is
    checked before anything is sorted or written, so a bad argument is InvalidArgument naming
    it (not the TypeError or AttributeError of comparing or measuring it)."""
    if not isinstance(state_dict, dict):
        raise InvalidArgument(f"state_dict is a {type(state_dict).__name__}, not a dict of "
                              "name -> tensor")
    header: Dict[str, Any] = {}
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InvalidArgument(f"metadata is a {type(metadata).__name__}, not a dict")
        for k, v in metadata.items():
            if not (isinstance(k, str) and isinstance(v, str) and _unicode(k) and _unicode(v)):
                raise InvalidArgument(f"metadata {k!r}: {v!r}: metadata must map strings to "
                                      "strings (Unicode text, no lone surrogates)")
        if metadata:
            header["__metadata__"] = dict(metadata)
    for name, t in state_dict.items():
        if not isinstance(name, str) or name == "__metadata__" or not _unicode(name):
            raise InvalidArgument(f"tensor name {name!r} is not a str of Unicode text (or is "
                                  "the reserved __metadata__)")
        if not isinstance(t, torch.Tensor):
            raise InvalidArgument(f"{name!r} is a {type(t).__name__}, not a tensor")
        if t.dtype not in _NAMES:
            raise InvalidArgument(f"{name!r}: dtype {t.dtype} has no safetensors name")
    layout = []
    offset = 0
    # Larger elements first, then by name: every tensor starts aligned for its dtype.
    order = sorted(state_dict.items(), key=lambda kv: (-kv[1].element_size(), kv[0]))
    for name, t in order:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + n]}
        layout.append((name, t, offset))
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as safetensors writes it
    if len(text) > MAX_HEADER_BYTES:
        raise InvalidArgument(f"the header would be {len(text)} bytes, past the format's "
                              f"{MAX_HEADER_BYTES} ({len(state_dict)} tensors)")
    head = struct.pack("<Q", len(text)) + text
    # What is written is what load_safetensors (and safetensors) takes: the same checks.
    parse_header(head, len(head) + offset)
    return head, layout


def save_safetensors(state_dict: Dict[str, torch.Tensor], client: Store, volume: str, *,
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


# ---- GPU memory a pod can hand over: the pool ----

_ALLOC, _FREE = "gdrstore_torch_alloc", "gdrstore_torch_free"
_allocator_lock = threading.Lock()
# The process's one CUDAPluggableAllocator, never dropped: each MemPool made on it keeps only a
# raw pointer to it in PyTorch's C++ side, and uses it again for every free.
_allocator = None


def memory_pool(device=None) -> "torch.cuda.MemPool":
    """A new torch.cuda.MemPool on `device` ("cuda", "cuda:1", 1, a torch.device; None: the
    current one) whose memory libgdrclient allocates (gdrstore_torch_alloc): CUDA VMM memory,
    shareable as a POSIX file descriptor and GPUDirect-RDMA capable. Tensors made in it are
    handed to gdrstored's local transport and to gdragent as a descriptor (path .../vmm-fd),
    which needs neither the host's IPC nor its PID namespace (legacy CUDA IPC, what the default
    allocator's memory takes, needs the agent in the host's PID namespace), and rc/dc register
    them by dma-buf.

        pool = gdrstore.torch.memory_pool("cuda:0")
        with torch.cuda.use_mem_pool(pool):
            t = torch.empty(n, dtype=torch.uint8, device="cuda:0")

    Each call makes a new pool (pools cache what they freed for their own tensors only): keep
    one per device and use it on that device (torch.cuda.use_mem_pool(pool, device), or with the
    device current). Its memory goes back to the GPU once the pool object and its tensors are
    gone and torch.cuda.empty_cache() runs. PyTorch refuses MemPool allocations while
    expandable_segments is on (PYTORCH_CUDA_ALLOC_CONF).
    TypeError / InvalidArgument for a device that is not a CUDA one; FailedPrecondition naming
    each thing missing: torch.cuda.MemPool (PyTorch 2.5 or newer), a GPU torch can use, or the
    hooks in the loaded libgdrclient."""
    index = _cuda_ordinal(device)
    missing = []
    if not (hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool") and
            hasattr(torch.cuda.memory, "CUDAPluggableAllocator")):
        missing.append(f"torch.cuda.MemPool and torch.cuda.use_mem_pool, which torch "
                       f"{torch.__version__} lacks (PyTorch 2.5 or newer has them)")
    if not torch.cuda.is_available():
        why = ("this torch is built without CUDA" if torch.version.cuda is None else
               "no GPU, or no NVIDIA driver, is visible to this process")
        missing.append(f"a GPU torch can use (torch.cuda.is_available() is False: {why})")
    if not hasattr(_native.lib._cdll, _ALLOC) or not hasattr(_native.lib._cdll, _FREE):
        missing.append(f"{_ALLOC} and {_FREE} in libgdrclient ({_library_path()} lacks them: a "
                       "library older than this package)")
    if missing:
        raise FailedPrecondition("gdrstore.torch.memory_pool needs " + "; and ".join(missing))
    count = torch.cuda.device_count()
    if index is None:
        index = torch.cuda.current_device()
    if index >= count:
        raise InvalidArgument(f"device {device!r}: torch sees {count} GPU(s), cuda:0.."
                              f"cuda:{count - 1}")
    allocator = _pluggable_allocator()
    # A MemPool belongs to the device current when it is made.
    with torch.cuda.device(index):
        return torch.cuda.MemPool(allocator=allocator.allocator())


def _cuda_ordinal(device) -> Optional[int]:
    """The CUDA ordinal `device` names; None for the current device."""
    if device is None:
        return None
    if isinstance(device, (str, torch.device)):
        try:
            parsed = torch.device(device)
        except (RuntimeError, ValueError, TypeError) as e:
            raise InvalidArgument(f"device {device!r} is not a device torch knows: {e}") from None
        if parsed.type != "cuda":
            raise InvalidArgument(f"device {device!r} is not a CUDA device: the pool holds GPU "
                                  "memory")
        return parsed.index
    if isinstance(device, bool):
        raise TypeError("device must be a CUDA device (\"cuda:0\", 0, a torch.device) or None, "
                        "not bool")
    try:
        index = operator.index(device)
    except TypeError:
        raise TypeError(f"device must be a CUDA device (\"cuda:0\", 0, a torch.device) or None, "
                        f"not {type(device).__name__}") from None
    if index < 0:
        raise InvalidArgument(f"device {index} is not a CUDA ordinal (0 or more)")
    return index


def _pluggable_allocator():
    global _allocator
    with _allocator_lock:
        if _allocator is None:
            _allocator = torch.cuda.memory.CUDAPluggableAllocator(_library_path(), _ALLOC, _FREE)
        return _allocator


def _library_path() -> str:
    """The file the loaded libgdrclient was mapped from, as the kernel names it (absolute, links
    resolved), found from where one of its functions lies in this process. PyTorch loads the
    library again by this path and gets the same one: the loader knows it by file identity.
    The name it was loaded by where /proc is not there to ask."""
    cdll = _native.lib._cdll
    address = ctypes.cast(cdll.gdrstore_abi_version, ctypes.c_void_p).value
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith("/"):
                    continue
                low, high = (int(x, 16) for x in fields[0].split("-"))
                if low <= address < high and os.path.exists(fields[5]):
                    return fields[5]
    except OSError:
        pass
    return cdll._name
