"""The workloads' published parameters: MLPerf Storage's training and checkpointing models and
the KV-cache models, with where each figure comes from (docs/workloads.md lists the sources).
Figures a source does not give are this project's choice, marked as such."""

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class TrainModel:
    """One MLPerf Storage training workload as its DLIO config states it (v2.0, H100:
    mlcommons/storage configs/dlio/workload/<name>_h100.yaml); a field the config leaves out
    takes DLIO's default (dlio_benchmark/utils/config.py, ConfigArguments)."""
    name: str
    sample_bytes: int          # DLIO record_length_bytes: mean sample size
    sample_stdev: int          # record_length_bytes_stdev (0: every sample the same size)
    samples_per_file: int      # num_samples_per_file
    files: int                 # num_files_train of the config (the closed size is mlpstorage's
                               # datasize rule instead: train.closed_dataset_files)
    batch: int                 # reader.batch_size per accelerator
    compute_s: float           # train.computation_time per step on an H100
    read_threads: int          # reader.read_threads: loader workers (PyTorch) or parallel
                               # record-file readers (TFRecord)
    au_threshold: float        # metric.au: the mean AU a run must reach to pass
    loader: str = "pytorch"    # reader.data_loader: pytorch, or tensorflow (TFRecord files)
    prefetch_size: int = 2     # reader.prefetch_size (DLIO's default 2)
    computation_threads: int = 1  # reader.computation_threads (TFRecord: batches parsed at once)
    sample_shuffle: bool = True   # reader.sample_shuffle is seed (DLIO's default: off)
    shuffle_size: int = 1024   # reader.shuffle_size: the TFRecord shuffle buffer, in samples
    file_shuffle: bool = False  # reader.file_shuffle is seed (TFRecord: the files' order)


TRAIN: Dict[str, TrainModel] = {m.name: m for m in [
    TrainModel("unet3d", 146_600_628, 68_341_808, 1, 168, 7, 0.323, 4, 0.90,
               file_shuffle=True),
    # resnet50's config sets no sample_shuffle: DLIO's default (off) leaves its 1024-sample
    # shuffle buffer out of the pipeline.
    TrainModel("resnet50", 114_660, 0, 1251, 1024, 400, 0.224, 8, 0.90, loader="tensorflow",
               computation_threads=8, sample_shuffle=False),
    TrainModel("cosmoflow", 2_828_486, 71_311, 1, 524_288, 1, 0.00351, 4, 0.70,
               loader="tensorflow", shuffle_size=2, file_shuffle=True),
]}


@dataclass(frozen=True)
class CheckpointModel:
    """One MLPerf Storage checkpointing workload: the checkpoint's published total size on its
    published number of ranks, and the parallelism this project assumes to split it (tensor x
    pipeline ranks hold distinct model shards; data-parallel replicas write the model state
    once, from data-parallel rank 0, while the optimizer state (ZeRO) is spread over every
    rank)."""
    name: str
    total_bytes: int       # the published checkpoint size
    ranks: int             # the published rank count
    tensor: int            # tensor-parallel size (assumed)
    pipeline: int          # pipeline-parallel size (assumed)
    model_fraction: float  # share of the checkpoint that is model state: bf16 weights (2 bytes
                           # a parameter) of 14 bytes a parameter with fp32 master weights and
                           # two Adam moments (12)

    @property
    def data_parallel(self) -> int:
        return max(1, self.ranks // (self.tensor * self.pipeline))

    def shard_bytes(self, rank: int) -> int:
        """What logical rank `rank` writes: its (tensor, pipeline) part of the model state if it
        is data-parallel rank 0, plus its share of the optimizer state."""
        model = self.total_bytes * self.model_fraction
        optimizer = self.total_bytes - model
        n = optimizer / self.ranks
        if rank // (self.tensor * self.pipeline) == 0:  # data-parallel rank 0 of its group
            n += model / (self.tensor * self.pipeline)
        return int(n)


_GB = 1000 ** 3
CHECKPOINT: Dict[str, CheckpointModel] = {m.name: m for m in [
    CheckpointModel("llama3-8b", 105 * _GB, 8, 1, 1, 2 / 14),
    CheckpointModel("llama3-70b", 912 * _GB, 64, 8, 4, 2 / 14),
    CheckpointModel("llama3-405b", 5290 * _GB, 512, 8, 32, 2 / 14),
    CheckpointModel("llama3-1t", 18000 * _GB, 1024, 8, 64, 2 / 14),
]}


@dataclass(frozen=True)
class KvModel:
    """A model's KV cache per token: layers x KV heads x head size x 2 (K and V) x 2 bytes
    (bf16), from the model's published config."""
    name: str
    layers: int
    kv_heads: int
    head_dim: int

    @property
    def bytes_per_token(self) -> int:
        return self.layers * self.kv_heads * self.head_dim * 2 * 2


KV: Dict[str, KvModel] = {m.name: m for m in [
    KvModel("llama3-8b", 32, 8, 128),     # 128 KiB a token
    KvModel("llama3-70b", 80, 8, 128),    # 320 KiB a token
    KvModel("mistral-7b", 32, 8, 128),    # 128 KiB a token
    KvModel("qwen2.5-7b", 28, 4, 128),    # 56 KiB a token
]}
