"""DLIO's sample order (branch mlperf_storage_v2.0, which mlcommons/storage pins), as pure
functions of the seed and the dataset's sizes: which samples each rank reads in an epoch and in
what order, through its PyTorch sampler (a contiguous block a rank, shuffled within it) or its
TFRecord pipeline (a rank's record files read in parallel, through a shuffle buffer). train.py
plans each rank's epochs from them; the tests check them against numpy and DLIO's own code."""

import random
from typing import Any, List, Tuple

from ..errors import InvalidArgument


# DLIO's sample order: numpy's legacy global generator (np.random.seed, np.random.shuffle),
# written out here so that the package needs no numpy; the test checks it against numpy.
def _mt19937(seed: int) -> random.Random:
    """A generator whose getrandbits(32) gives what numpy's RandomState(seed) draws: the
    MT19937 state of init_genrand(seed), the one numpy's legacy seeding makes from an int."""
    mt = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
    g = random.Random()
    g.setstate((3, tuple(mt) + (624,), None))
    return g


def _legacy_shuffle(seed: int, values: List[int]) -> None:
    """numpy's RandomState(seed).shuffle of a 1-D array, in place: Fisher-Yates from the end,
    each index drawn by masked rejection (numpy's random_interval)."""
    g = _mt19937(seed)
    for i in range(len(values) - 1, 0, -1):
        mask = i
        for s in (1, 2, 4, 8, 16):
            mask |= mask >> s
        j = g.getrandbits(32) & mask
        while j > i:
            j = g.getrandbits(32) & mask
        values[i], values[j] = values[j], values[i]


def dlio_rank_samples(seed: int, samples: int, ranks: int, rank: int, epoch: int,
                      shuffle: bool = True) -> List[int]:
    """The global sample indices rank `rank` reads in epoch `epoch` (1-based, as DLIO counts)
    and their order, as DLIO's PyTorch path assigns them (dlio_benchmark/utils/config.py,
    ConfigArguments.get_global_map_index, and torch_data_loader.py's dlio_sampler): a
    contiguous block of ceil(samples / ranks), the last rank's cut at the end, so a rank reads
    the same samples every epoch; shuffled within the block by numpy's generator seeded with
    seed + epoch (seed_change_epoch) when sample_shuffle is on."""
    if not 0 < ranks <= samples or not 0 <= rank < ranks:
        raise InvalidArgument(f"rank {rank} of {ranks} over {samples} samples")
    if not 0 <= seed + epoch <= 0xFFFFFFFF:
        raise InvalidArgument(f"seed {seed} + epoch {epoch} is outside [0, 2^32 - 1] (numpy's "
                              "seed range)")
    per = -(-samples // ranks)
    block = list(range(rank * per, min((rank + 1) * per, samples)))
    if shuffle:
        _legacy_shuffle(seed + epoch, block)
    return block


def dlio_tfrecord_records(files: int, samples_per_file: int, ranks: int, rank: int,
                          read_threads: int, shuffle_size: int, seed: int,
                          file_shuffle: bool = False
                          ) -> Tuple[List[Tuple[int, int]], List[int]]:
    """Rank `rank`'s records through DLIO's TFRecord pipeline (dlio_benchmark/reader/
    tf_reader.py, TFReader.next): the file list, shuffled when file_shuffle is on as
    ConfigArguments.reconfigure shuffles it for the first epoch (numpy's generator seeded with
    seed + 1) before the pipeline is built; the rank's files are every ranks-th one of it from
    `rank` (all of them when there are fewer files than ranks); read_threads files are read at
    once, each
    sequentially, their records interleaved in turn (TFRecordDataset num_parallel_reads, a
    finished file's reader taking the next file); a seeded buffer of shuffle_size records
    (0: none) picks each next record at random; with fewer files than ranks, every ranks-th
    record is kept. Returns (the records read, as (reader, sample index) in read order, and
    the sample indices the pipeline yields, in order). The same every epoch: DLIO's pipeline
    restarts from its seed."""
    if not 0 <= seed + 1 <= 0xFFFFFFFF:
        raise InvalidArgument(f"seed {seed} + 1 is outside [0, 2^32 - 1] (numpy's seed range)")
    file_list = list(range(files))
    if file_shuffle:
        _legacy_shuffle(seed + 1, file_list)
    mine = file_list[rank::ranks] if files >= ranks else file_list
    pending = iter(mine)
    open_files: List[List[Any]] = []  # [reader, the file's records left]
    for w in range(min(read_threads, len(mine))):
        f = next(pending)
        open_files.append([w, iter(range(f * samples_per_file, (f + 1) * samples_per_file))])
    reads: List[Tuple[int, int]] = []
    i = 0
    while open_files:
        w, records = open_files[i]
        s = next(records, None)
        if s is None:
            f = next(pending, None)
            if f is None:
                del open_files[i]
                i = i % len(open_files) if open_files else 0
            else:
                open_files[i][1] = iter(range(f * samples_per_file, (f + 1) * samples_per_file))
            continue
        reads.append((w, s))
        i = (i + 1) % len(open_files)
    order = [s for _, s in reads]
    if shuffle_size > 1:
        rng = random.Random(seed)
        buf: List[int] = []
        order = []
        for _, s in reads:
            if len(buf) < shuffle_size:
                buf.append(s)
                continue
            j = rng.randrange(shuffle_size)  # a full buffer yields one and takes the next
            order.append(buf[j])
            buf[j] = s
        while buf:
            j = rng.randrange(len(buf))
            order.append(buf[j])
            buf[j] = buf[-1]
            buf.pop()
    if files < ranks:
        order = order[rank::ranks]
    return reads, order
