#!/usr/bin/env python3
"""Writes a synthetic gdrstored trace of a sharded checkpoint load (stdlib only).

N ranks (clients) each read their contiguous shard of one volume in fixed-size gets, keeping
QD ops in flight; the ranks share one device of BANDWIDTH bytes/s, so every op's latency is
what that many ops in flight over such a device take (plus LATENCY_US). The output is
deterministic: the same arguments write the same bytes. The format is the one
docs/simulation.md ("Traces: record and replay") specifies and common/wire/trace_format.cc reads.

  python3 tests/data/make_checkpoint_trace.py tests/data/checkpoint_load_8ranks.trace
"""
import argparse
import struct
import sys

MAGIC = b"GDRTRACE"
VERSION = 1
HEADER_BYTES = 32
RECORD_BYTES = 48
TAG_OP = 1
TAG_STRING = 2
TABLE_VOLUME = 1
TABLE_CLIENT = 2
KIND_GET = 0
# 2026-01-01T00:00:00Z: a fixed start keeps the file reproducible.
START_UNIX_NS = 1767225600 * 10**9


def parse_size(text):
    units = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for suffix in ("KiB", "MiB", "GiB", ""):
        if text.endswith(suffix) and text[: len(text) - len(suffix)].isdigit():
            return int(text[: len(text) - len(suffix)]) * units[suffix]
    raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 1MiB)")


def schedule(ranks, volume_bytes, op_bytes, qd, bandwidth, latency_us, stagger_us):
    """(start_ns, latency_ns, rank, offset) per op: each rank issues its shard's ops in order,
    a new one as soon as one of its QD slots frees."""
    shard = volume_bytes // ranks
    in_flight = ranks * qd
    # Every op shares the device with the others in flight.
    op_ns = latency_us * 1000 + (op_bytes * in_flight * 10**9) // bandwidth
    ops = []
    for rank in range(ranks):
        slots = [rank * stagger_us * 1000] * qd  # when each slot is free next
        for offset in range(rank * shard, (rank + 1) * shard, op_bytes):
            slot = min(range(qd), key=lambda s: slots[s])
            start = slots[slot]
            # A small deterministic spread, so percentiles are not all one value.
            latency = op_ns + ((offset // op_bytes) * 7919 % 97) * 1000
            slots[slot] = start + latency
            ops.append((start, latency, rank, offset))
    return ops


def encode(ops, volume, op_bytes):
    out = bytearray(MAGIC)
    out += struct.pack("<HHHHqQ", VERSION, HEADER_BYTES, RECORD_BYTES, 0, START_UNIX_NS, 0)
    ids = {TABLE_VOLUME: {}, TABLE_CLIENT: {}}

    def intern(table, name):
        names = ids[table]
        if name not in names:
            names[name] = len(names)
            raw = name.encode()
            out.extend(struct.pack("<BBHI", TAG_STRING, table, len(raw), names[name]) + raw)
        return names[name]

    # Records are in answer order, as the daemon writes them.
    for start, latency, rank, offset in sorted(ops, key=lambda o: (o[0] + o[1], o[2])):
        v = intern(TABLE_VOLUME, volume)
        c = intern(TABLE_CLIENT, f"ipv4:10.0.1.{rank + 1}:40000")
        out += struct.pack("<BBHIIIqQQQ", TAG_OP, KIND_GET, 0, c, v, 0, start, offset,
                           op_bytes, latency)
    return bytes(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("output")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--volume", default="ckpt")
    p.add_argument("--volume-size", type=parse_size, default=parse_size("256MiB"))
    p.add_argument("--op-size", type=parse_size, default=parse_size("1MiB"))
    p.add_argument("--qd", type=int, default=4, help="ops in flight per rank")
    p.add_argument("--bandwidth", type=parse_size, default=parse_size("6GiB"),
                   help="bytes/s of the device the ranks share")
    p.add_argument("--latency-us", type=int, default=80, help="per-op device latency")
    p.add_argument("--stagger-us", type=int, default=50, help="rank r starts r * this late")
    a = p.parse_args()
    if a.ranks < 1 or a.qd < 1 or a.op_size < 1 or a.volume_size % (a.ranks * a.op_size):
        sys.exit("volume size must be a multiple of ranks * op size (and all positive)")
    ops = schedule(a.ranks, a.volume_size, a.op_size, a.qd, a.bandwidth, a.latency_us,
                   a.stagger_us)
    data = encode(ops, a.volume, a.op_size)
    with open(a.output, "wb") as f:
        f.write(data)
    print(f"{a.output}: {len(ops)} gets by {a.ranks} ranks, {len(data)} bytes")


if __name__ == "__main__":
    main()
