#!/usr/bin/env python3
"""safetensors with CUDA tensors through gdrstore.torch, on the GPU host: a state dict on the GPU
saved into a volume made at run time (a file in the daemon's writable --volume-dir) is a file
safetensors.torch.load_file reads back equal; gdrstore.torch.load_safetensors of it, over tcp
and over local, equals safetensors' own load of the same file, tensor for tensor.

usage: safetensors_gpu_check.py ADDRESS CKPT_DIR   (CKPT_DIR: the daemon's writable --volume-dir)
"""

import os
import sys

import torch
from safetensors.torch import load_file

import gdrstore
import gdrstore.torch as gt

failed = 0


def check(ok, what):
    global failed
    print(("PASS  " if ok else "FAIL  ") + what)
    failed += 0 if ok else 1


def same(a, b):
    if set(a) != set(b):
        return False
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or list(x.shape) != list(y.shape) or x.device != y.device:
            return False
        # Bit for bit: random bf16 and fp16 patterns hold NaNs, which equal nothing.
        if x.numel() and not torch.equal(x.contiguous().view(-1).view(torch.uint8),
                                         y.contiguous().view(-1).view(torch.uint8)):
            return False
    return True


def main(address, ckpt_dir):
    g = torch.Generator(device="cuda").manual_seed(3)
    sd = {f"layers.{i}.{n}": torch.randn(s, device="cuda", generator=g).to(dt)
          for i in range(4)
          for n, s, dt in [("q", (1024, 1024), torch.bfloat16), ("norm", (1024,), torch.float32),
                           ("mlp", (1024, 2816), torch.float16)]}
    sd["step"] = torch.tensor(7, dtype=torch.int64, device="cuda")
    with gdrstore.Client(address) as c:
        size = gt.save_safetensors(sd, c, "gpu/rank0.safetensors", metadata={"format": "pt"})
        path = os.path.join(ckpt_dir, "gpu", "rank0.safetensors")
        check(os.path.getsize(path) == size, f"save: a {size}-byte file in the --volume-dir")
        ref = load_file(path, device="cuda")
        check(same(ref, sd), "save: safetensors.torch.load_file reads the CUDA state dict back")
    for transport in ("tcp", "local"):
        with gdrstore.Client(address, transport=transport) as c:
            paths = set()
            got = gt.load_safetensors(c, "gpu/rank0.safetensors", device="cuda", paths=paths)
            check(same(got, ref), f"load over {transport} equals safetensors' own "
                                  f"(paths {', '.join(sorted(paths))})")
    with gdrstore.Client(address) as c:
        c.delete_volume("gpu/rank0.safetensors", delete_file=True)
    check(not os.path.exists(path), "delete: the file is gone")
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1], sys.argv[2]) else 0)
