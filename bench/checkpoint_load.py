#!/usr/bin/env python3
"""A checkpoint shard loaded into GPU tensors, four ways in one run, each against the same file:
safetensors' own loader (`safetensors.torch.load_file(device="cuda")`), a pinned host->GPU copy
of the same bytes (what the GPU's link carries), and gdrstore from a gdrstored serving the file
as a volume, over tcp and over the local transport (and through gdragent when given). Prints
each rate and its ratio to safetensors' loader and to the pinned copy; every tensor gdrstore
loaded is compared with safetensors' own.

The shard is Llama-like: per layer, q/k/v/o projections, gate/up/down MLP projections and two
norms in bfloat16, scaled to --size-gib with --tensors tensors in all. The page cache holds the
file for every reader (it is read once first), so all four read the same memory.

usage: bench/checkpoint_load.py --gdrstored BIN [--gdragent BIN] [--size-gib 6.5] [--tensors 144]
       [--dir DIR] [--rounds 2] [--transports tcp,local[,agent]]
With --gdragent, "agent" loads through a gdragent whose upstream is the daemon over local.
Needs torch with CUDA and safetensors; GDRSTORE_LIBRARY names libgdrclient.so.1 when it is not
beside the package."""

import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

import gdrstore  # noqa: E402
import gdrstore.torch as gt  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20


def llama_like_shapes(total_bytes, tensors):
    """(name, shape) of `tensors` bf16 tensors adding up to about `total_bytes`: layers of 9
    tensors (7 projections, 2 norms) whose hidden size is chosen to fit."""
    layers = max(1, tensors // 9)
    # A layer's projections: 4 h*h (q, k, v, o) + 3 h*(h*8/3) (MLP) ~ 12 h^2 elements of 2 bytes.
    h = int((total_bytes / layers / 2 / 12) ** 0.5) // 128 * 128
    ff = h * 8 // 3 // 128 * 128
    shapes = []
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes += [(p + "self_attn.q_proj.weight", (h, h)), (p + "self_attn.k_proj.weight", (h, h)),
                   (p + "self_attn.v_proj.weight", (h, h)), (p + "self_attn.o_proj.weight", (h, h)),
                   (p + "mlp.gate_proj.weight", (ff, h)), (p + "mlp.up_proj.weight", (ff, h)),
                   (p + "mlp.down_proj.weight", (h, ff)),
                   (p + "input_layernorm.weight", (h,)),
                   (p + "post_attention_layernorm.weight", (h,))]
    return shapes[:tensors]


def write_shard(path, shapes):
    """A safetensors file of random bf16 tensors (a 64 MiB random block repeated, so making it
    costs seconds, not minutes)."""
    header, offset = {}, 0
    for name, shape in shapes:
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    block = os.urandom(64 * MiB)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        left = offset
        while left:
            k = min(left, len(block))
            f.write(block[:k])
            left -= k
    return 8 + len(h), header


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return 8 + n, header


def warm(path):
    with open(path, "rb") as f:
        while f.read(64 * MiB):
            pass


def start_daemon(gdrstored, work):
    port_file = os.path.join(work, "port")
    sock = os.path.join(work, "local.sock")
    log = open(os.path.join(work, "gdrstored.log"), "w")
    p = subprocess.Popen([gdrstored, "--listen", "127.0.0.1:0", "--port-file", port_file,
                          "--volume-dir", work, "--local-socket", sock,
                          "--max-op-size", "1GiB", "--log-level", "warning"],
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
            return p, "127.0.0.1:" + open(port_file).read().strip(), sock
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    sys.exit("gdrstored did not start:\n" + open(os.path.join(work, "gdrstored.log")).read())


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gdrstored", required=True)
    ap.add_argument("--gdragent")
    ap.add_argument("--size-gib", type=float, default=6.5)
    ap.add_argument("--tensors", type=int, default=144)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--transports", default="tcp,local")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="gdr-ckpt-", dir=args.dir)
    path = os.path.join(work, "model-00001-of-00002.safetensors")
    write_shard(path, llama_like_shapes(int(args.size_gib * GiB), args.tensors))
    size = os.path.getsize(path)
    data_start, header = read_header(path)
    warm(path)
    nbytes = size - data_start
    print(f"checkpoint_load: {size / GiB:.2f} GiB shard, {len(header)} bf16 tensors, "
          f"{torch.cuda.get_device_name(0)}, {os.cpu_count()} CPUs")

    # The directory served as it lies: the shard is a read-only volume named by its file name.
    daemon, address, sock = start_daemon(args.gdrstored, work)
    volume = os.path.basename(path)
    agent, agent_sock = None, os.path.join(work, "agent.sock")
    if args.gdragent:
        agent = subprocess.Popen([args.gdragent, "--daemon", address, "--transport", "local",
                                  "--socket", agent_sock, "--log-level", "warning"],
                                 stdout=open(os.path.join(work, "gdragent.log"), "w"),
                                 stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not os.path.exists(agent_sock) and time.monotonic() < deadline:
            time.sleep(0.05)

    def client(tr):
        return gdrstore.Client(agent=agent_sock) if tr == "agent" else \
            gdrstore.Client(address, transport=tr)
    seen_paths = {}
    rates = {}
    try:
        best = {}
        reference = None
        for _ in range(args.rounds):
            t, reference = timed(lambda: load_file(path, device="cuda"))
            best["safetensors"] = min(best.get("safetensors", t), t)
            del reference
            pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            t, dev = timed(lambda: pinned.to("cuda", non_blocking=True))
            best["pinned copy"] = min(best.get("pinned copy", t), t)
            del dev, pinned
            for tr in args.transports.split(","):
                with client(tr) as c:
                    paths = set()
                    t, loaded = timed(lambda: gt.load_safetensors(c, volume, "cuda", paths=paths))
                    best[f"gdrstore {tr}"] = min(best.get(f"gdrstore {tr}", t), t)
                    seen_paths[f"gdrstore {tr}"] = ", ".join(sorted(paths))
                    del loaded
        # Checked once, outside the timing: every tensor as safetensors loads it.
        reference = load_file(path, device="cuda")
        for tr in args.transports.split(","):
            with client(tr) as c:
                loaded = gt.load_safetensors(c, volume, "cuda")
                # As 16-bit integers: random bf16 bit patterns hold NaNs, which equal nothing.
                bad = [k for k in reference
                       if not torch.equal(reference[k].view(torch.int16), loaded[k].view(torch.int16))]
                if bad:
                    sys.exit(f"gdrstore {tr}: {len(bad)} tensors differ, e.g. {bad[0]}")
                del loaded
        del reference
        for k, t in best.items():
            rates[k] = nbytes / t / 1e9
        base, link = rates["safetensors"], rates["pinned copy"]
        for k, r in rates.items():
            print(f"  {k:<22} {r:7.2f} GB/s   {r / base:5.2f}x safetensors   "
                  f"{r / link:5.2f}x pinned copy   {seen_paths.get(k, '')}")
        print("  every tensor gdrstore loaded equals safetensors' own")
    finally:
        if agent is not None:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=60)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        os.unlink(path)


if __name__ == "__main__":
    main()
