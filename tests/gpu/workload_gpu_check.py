#!/usr/bin/env python3
"""The workloads with their accelerators on the GPU, on the GPU host: each at a tiny scale over
tcp and local, rank 0 on the GPU by PCI address and rank 1 by ordinal, data landing in GPU
memory and compute as a GPU kernel; their results checked against what their inputs imply
(every sample verified, every checkpoint byte read back and checked, the KV hit rate as the
request sequence predicts).

usage: workload_gpu_check.py ADDRESS GPU_PCI CKPT_DIR   (CKPT_DIR: the daemon's writable
--volume-dir)
"""

import sys

from gdrstore import workload
from gdrstore.workload import checkpoint, kvcache, train

failed = 0


def check(ok, what):
    global failed
    print(("PASS  " if ok else "FAIL  ") + what)
    failed += 0 if ok else 1


def main():
    address, pci = sys.argv[1], sys.argv[2]
    gpus = (pci, "0")
    for transport in ("tcp", "local"):
        t = workload.Target(daemons=[address], transport=transport)
        cfg = train.TrainConfig(model=train.model_with("resnet50", compute_s=0.05), target=t,
                                ranks=2, gpus=gpus, scale=0.001, steps=3, epochs=1,
                                client_memory=1 << 30, prefix=f"gpuchk-{transport}")
        r = train.run(cfg)
        check(r["compute"] == "gpu-kernel" and
              all(x["device"] == "cuda:0" and x["samples_verified"] == 3 * 400
                  for x in r["per_rank"]),
              f"{transport}: train resnet50, 2 ranks on the GPU, every sample verified "
              f"(AU {r['au'] * 100:.1f} %)")
        # A step's kernel spins for its compute time: compute over 2 measured steps.
        check(all(0.09 <= x["compute_s"] <= 0.2 for x in r["per_rank"]),
              f"{transport}: the GPU kernel took the step's compute time "
              f"({[round(x['compute_s'], 3) for x in r['per_rank']]} s for 2 x 0.05 s)")
        c = checkpoint.run(checkpoint.CheckpointConfig(
            model=checkpoint.model_named("llama3-8b"), target=t, ranks=2, gpus=gpus,
            scale=0.001, writes=1, reads=1, interval_s=0.0, chunk=16 << 20,
            prefix=f"gpuchk-{transport}"))
        moved = sum(x["checkpoints"][0]["bytes"] for x in c["per_rank"]["read"])
        check(moved == c["checkpoint_bytes"],
              f"{transport}: checkpoint llama3-8b x 0.001 written from and read back into GPU "
              f"memory, checked ({c['write']['gib_per_s']['mean']:.2f} / "
              f"{c['read']['gib_per_s']['mean']:.2f} GiB/s)")
        k_cfg = kvcache.KvConfig(model=kvcache.model_named("llama3-8b"), target=t, gpus=gpus,
                                 requests=40, prefixes=4, prefix_tokens=64, capacity=4096,
                                 prefix=f"gpuchk-{transport}")
        seen, hits, blocks = set(), 0, 0
        for pid, plen, slen in kvcache.requests(k_cfg, 0):
            blocks += (plen + slen) // k_cfg.block_tokens
            hits += plen // k_cfg.block_tokens if pid in seen else 0
            seen.add(pid)
        k = kvcache.run(k_cfg)
        check(abs(k["hit_rate"] - hits / blocks) < 1e-9,
              f"{transport}: kvcache blocks into GPU memory, hit rate {k['hit_rate']:.3f} as "
              "predicted, stamps checked")
    print("workload GPU checks: " + ("ALL PASSED" if failed == 0 else f"{failed} FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
