#!/usr/bin/env python3
"""A workload in a pod loading its checkpoint through the node agent, on the GPU host: run
(by tests/gpu/pod_view.sh) in its own IPC, PID and mount namespaces as an unprivileged uid,
with only the agent's socket (GDRSTORE_AGENT) and the wheel installed in its venv. Loads the
safetensors file in VOLUME with gdrstore.torch.load_safetensors into GPU memory from one
allocator and compares it, tensor for tensor, with safetensors' own load_file of FILE.

Allocators: default (PyTorch's caching allocator: cudaMalloc segments, CUDA IPC), expandable
(the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which the caller sets: VMM
chunks side by side), pool (gdrstore.torch.memory_pool: VMM allocations shareable as fds),
cupy (CuPy's default pool: cudaMalloc; each tensor's bytes got into a CuPy array).

usage: pod_load_check.py ALLOCATOR VOLUME FILE
Prints one line "RESULT ALLOCATOR ok|fail PATHS|ERROR GB/s" and exits non-zero on a failure."""

import json
import os
import sys
import time

import torch
from safetensors.torch import load_file

import gdrstore
import gdrstore.torch as gt


def same(a, b):
    if set(a) != set(b):
        return f"names differ: {sorted(set(a) ^ set(b))[:4]}"
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or list(x.shape) != list(y.shape):
            return f"{k}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
        if x.numel() and not torch.equal(x.contiguous().view(-1).view(torch.uint8).cuda(),
                                         y.contiguous().view(-1).view(torch.uint8).cuda()):
            return f"{k}: bytes differ"
    return None


def load_cupy(client, volume, ref, paths):
    """Each tensor's bytes got into a CuPy array (CuPy's pool: cudaMalloc), compared with the
    reference's bytes."""
    import cupy
    size = os.path.getsize(sys.argv[3])
    with open(sys.argv[3], "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    start = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        arr = cupy.empty(end - b, dtype=cupy.uint8)
        if end > b:
            paths.add(client.get(volume, start + b, arr).path)
        out[name] = torch.as_tensor(arr, device="cuda").view(ref[name].dtype).view(
            ref[name].shape)
    assert start <= size
    return out


def main(allocator, volume, path):
    ref = load_file(path, device="cuda")
    paths = set()
    client = gdrstore.Client()  # GDRSTORE_AGENT from the environment
    t0 = time.perf_counter()
    if allocator == "pool":
        pool = gt.memory_pool("cuda:0")
        with torch.cuda.use_mem_pool(pool):
            got = gt.load_safetensors(client, volume, device="cuda", paths=paths)
    elif allocator == "cupy":
        got = load_cupy(client, volume, ref, paths)
    else:
        got = gt.load_safetensors(client, volume, device="cuda", paths=paths)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    bad = same(got, ref)
    client.close()
    gbs = os.path.getsize(path) / seconds / 1e9
    if bad:
        print(f"RESULT {allocator} fail {bad}")
        return 1
    print(f"RESULT {allocator} ok {','.join(sorted(paths))} {gbs:.1f}GB/s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(*sys.argv[1:4]))
    except Exception as e:  # the reason goes on the one line the caller reads
        print(f"RESULT {sys.argv[1]} fail {type(e).__name__}: {str(e)[:400]}")
        sys.exit(1)
