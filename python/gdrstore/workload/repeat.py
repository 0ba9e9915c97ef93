"""Repeating dataset volumes for the training workload (docs/simulation.md, "Datasets larger
than memory"): a layout's volumes made repeating memory volumes, each holding `repeat` bytes of
a daemon's memory seen again every `repeat` bytes, so a dataset past the daemons' memory can be
read and verified. Layouts are train.Layout's (volumes, repeats); cfg a train.TrainConfig."""

from dataclasses import replace

from ..errors import InvalidArgument, ResourceExhausted
from . import hosts
from .target import Volumes

_ALIGN = 4096  # a repeat is a whole number of pages (the daemon checks its own page size)
# At most this many periods (the daemon's kMaxRepeatPeriods); one chosen for a dataset the
# daemons cannot hold holds at least _AUTO_REPEAT_MIN of each volume.
REPEAT_MAX_PERIODS = 16384
_AUTO_REPEAT_MIN = 1 << 30


def repeated(layout, repeat: int):
    """The layout with each volume larger than `repeat` made a repeating one, its size rounded
    up to whole periods (the samples stay where they were). InvalidArgument naming --repeat
    when it is not a multiple of 4 KiB or a volume would recur more than REPEAT_MAX_PERIODS
    times."""
    if repeat <= 0 or repeat % _ALIGN:
        raise InvalidArgument(f"--repeat {repeat} B is not a positive multiple of 4 KiB")
    volumes, repeats = [], []
    for name, size in layout.volumes:
        periods = -(-size // repeat)
        if periods > REPEAT_MAX_PERIODS:
            least = -(-size // REPEAT_MAX_PERIODS // _ALIGN) * _ALIGN
            raise InvalidArgument(f"--repeat {repeat} B recurs {periods} times in volume {name} "
                                  f"({size} B); at most {REPEAT_MAX_PERIODS}: give at least "
                                  f"{least} B")
        volumes.append((name, periods * repeat if periods > 1 else size))
        repeats.append(repeat if periods > 1 else 0)
    return replace(layout, volumes=tuple(volumes), repeats=tuple(repeats))


def auto_repeat(layout) -> int:
    """The repeat of a dataset the daemons cannot hold: _AUTO_REPEAT_MIN, or more when the
    largest volume needs it to stay within REPEAT_MAX_PERIODS, in whole MiB."""
    need = max(_AUTO_REPEAT_MIN, -(-max(size for _, size in layout.volumes) //
                                   REPEAT_MAX_PERIODS))
    return -(-need // (1 << 20)) * (1 << 20)


def make_dataset(vols: Volumes, cfg, layout):
    """Makes the dataset's volumes, the layout they were made for returned. With cfg.repeat
    None, a memory volume that a daemon cannot hold (RESOURCE_EXHAUSTED) has every volume made
    again repeating (auto_repeat), where this process alone decides the layout (not with ranks
    on several hosts: they give --repeat)."""
    def make(lay) -> None:
        for i, (name, size) in enumerate(lay.volumes):
            vols.make(i, name, size, repeat=lay.repeat_of(i))

    try:
        make(layout)
        return layout
    except ResourceExhausted:
        if (cfg.repeat is not None or cfg.file or cfg.target.cluster is not None or
                hosts.session() is not None):
            raise
    vols.remove()
    layout = repeated(layout, auto_repeat(layout))
    make(layout)
    return layout
