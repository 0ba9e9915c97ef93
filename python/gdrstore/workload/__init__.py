"""The workloads ML teams run, against gdrstored volumes and into GPU (or host) memory, one
process per simulated accelerator (docs/workloads.md):

    from gdrstore import workload
    t = workload.Target(daemons=["127.0.0.1:50051"], transport="local")
    r = workload.train.run(workload.train.TrainConfig(
        model=workload.train.model_with("unet3d"), target=t, ranks=8, scale=0.05))
    print(r["au"], r["passed"])

train: MLPerf Storage's training (unet3d, resnet50, cosmoflow) with accelerator utilisation;
checkpoint: MLPerf Storage's checkpointing (llama3-8b ... 1t), write then read; kvcache: KV
blocks with prefix reuse. `python3 -m gdrstore.workload` (and `gdrctl workload`) is the CLI."""

from . import checkpoint, kvcache, models, train
from .target import Target

__all__ = ["Target", "train", "checkpoint", "kvcache", "models"]
