"""The workloads' published parameters: MLPerf Storage's training and checkpointing models and
the KV-cache models, with where each figure comes from (docs/workloads.md lists the sources).
Figures a source does not give are this project's choice, marked as such."""

from dataclasses import dataclass
from typing import Dict, List, Tuple


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
    """One MLPerf Storage checkpointing workload as mlcommons/storage's DLIO configs state it
    (configs/dlio/workload/llama3_*.yaml, the rules' Table 2): the transformer's shape and its
    training layout, tensor x pipeline x data-parallel ranks with a DeepSpeed ZeRO stage.
    What each rank writes is what DLIO writes for it (branch mlperf_storage_v2.0,
    dlio_benchmark/checkpointing/base_checkpointing.py, BaseCheckpointing): fp16 model state
    (one file per layer where pipeline parallelism splits the model and ZeRO-1 keeps it whole
    on data-parallel rank 0; one file per rank, sharded over the data-parallel ranks, with
    ZeRO-3) and fp32 optimizer state, three groups spread over every rank."""
    name: str
    layers: int          # num_layers
    hidden: int          # hidden_size
    ffn: int             # ffn_hidden_size
    heads: int           # num_attention_heads
    kv_heads: int        # num_kv_heads
    tensor: int          # parallelism.tensor
    pipeline: int        # parallelism.pipeline
    data: int            # data-parallel replicas: the rules' process count / (tensor x pipeline)
    zero_stage: int      # parallelism.zero_stage (1 or 3 in the official configs)
    stated: str          # the checkpoint size the rules' Table 2 prints
    vocab: int = 128_256           # vocab_size
    model_dtype_bytes: int = 2     # model_datatype fp16
    optimizer_dtype_bytes: int = 4  # optimizer_datatype fp32

    @property
    def ranks(self) -> int:
        return self.tensor * self.pipeline * self.data

    @property
    def _kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads

    @property
    def parameters(self) -> int:
        """DLIO's parameter count: embedding and LM head, each layer's two norms, attention
        with grouped K and V, the gated MLP, and the final norm."""
        h = self.hidden
        layer = 2 * h + h * (h + 2 * self._kv_dim) + h * h + 3 * h * self.ffn
        return 2 * self.vocab * h + layer * self.layers + h

    def layer_span(self, rank: int) -> Tuple[int, int]:
        """The first and last layer (inclusive) of `rank`'s pipeline stage. Layer 0 is the
        embedding, 1..L the transformer layers, L+1 the LM head and L+2 the final norm; the
        transformer layers are dealt over the stages, the first stages taking one more when
        they do not divide; stage 0 adds the embedding, the last stage the head and norm."""
        stage = rank // self.tensor % self.pipeline
        per, extra = divmod(self.layers, self.pipeline)
        first = stage * per + min(stage, extra) + 1
        last = first + per - (0 if stage < extra else 1)
        if stage == self.pipeline - 1:
            last = self.layers + 2
        if stage == 0:
            first = 0
        return first, last

    def layer_elements(self, layer: int) -> List[int]:
        """The elements of each tensor of `layer` one rank holds: matrices split over the
        tensor ranks, and with ZeRO-3 everything over the data-parallel ranks too (integer
        division, as DLIO's)."""
        h, t = self.hidden, self.tensor
        shard = self.data if self.zero_stage == 3 else 1
        if layer in (0, self.layers + 1):
            return [h * self.vocab // t // shard]
        if layer == self.layers + 2:
            return [h // shard]
        return [h // shard, h * (h + 2 * self._kv_dim) // t // shard, h * h // t // shard,
                h // shard, 2 * h * self.ffn // t // shard, h * self.ffn // t // shard]

    def files(self, rank: int) -> List[Tuple[str, int]]:
        """(DLIO's file name, bytes) of each file `rank` writes in one checkpoint, in the
        order it writes them: model state, then optimizer state."""
        mp = self.tensor * self.pipeline
        dp_rank, mp_rank = rank // mp, rank % mp
        first, last = self.layer_span(rank)

        def model(layers) -> int:
            return sum(n for i in layers for n in self.layer_elements(i) if n > 0) \
                * self.model_dtype_bytes

        out = []
        if self.zero_stage == 3:
            out.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states",
                        model(range(first, last + 1))))
        elif dp_rank == 0 and self.pipeline > 1:
            out += [(f"layer_{i}-model_{mp_rank}_model_states", model([i]))
                    for i in range(first, last + 1)]
        elif dp_rank == 0:
            out.append((f"model_{mp_rank}_model_states", model(range(first, last + 1))))
        # fp32 master weights and Adam's two moments, each with a small group of its own.
        groups = [self.parameters // self.ranks, 5 * self.hidden] * 3
        out.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states",
                    sum(n for n in groups if n > 0) * self.optimizer_dtype_bytes))
        return out

    def rank_bytes(self, rank: int) -> int:
        return sum(n for _, n in self.files(rank))

    @property
    def total_bytes(self) -> int:
        return sum(self.rank_bytes(r) for r in range(self.ranks))


# The official configs (mlcommons/storage configs/dlio/workload/llama3_{8b,70b,405b,1t}.yaml)
# with the rules' process counts (8, 64, 512, 1024). DLIO computes 104.7, 911.2, 5292.2 and
# 15426.6 GiB from them; the rules print "105 GB", "912 GB", "5.29 TB" and "18 TB". The last
# matches an earlier 1T config (32 attention heads, no grouped K and V: 17289 GiB), not this one.
CHECKPOINT: Dict[str, CheckpointModel] = {m.name: m for m in [
    CheckpointModel("llama3-8b", 32, 4096, 14336, 32, 8, 1, 1, 8, 3, "105 GB"),
    CheckpointModel("llama3-70b", 80, 8192, 28672, 128, 8, 8, 1, 8, 3, "912 GB"),
    CheckpointModel("llama3-405b", 126, 16384, 53248, 128, 8, 8, 32, 2, 1, "5.29 TB"),
    CheckpointModel("llama3-1t", 128, 25872, 98304, 192, 32, 8, 64, 2, 1, "18 TB"),
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
