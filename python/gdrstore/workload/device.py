"""A simulated accelerator's two halves: the memory its data lands in (host memory the library
allocates, or GPU memory by PCI address or CUDA ordinal) and the compute a step stands for (a
sleep, or on a GPU a kernel that spins for the step's time)."""

import ctypes
import os
import re
import time
from typing import List, Optional, Tuple

from ..store import Store
from ..errors import InvalidArgument, Unavailable

_PCI = re.compile(r"^([0-9A-Fa-f]{4}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")


def gpu_list(spec: Optional[str]) -> List[str]:
    """The GPUs of --gpu: "all" (every CUDA device), or a comma list of PCI addresses or
    ordinals. [] when no --gpu."""
    if spec is None:
        return []
    if spec == "all":
        return [str(i) for i in range(_cuda_count())]
    gpus = [g.strip() for g in spec.split(",")]
    for g in gpus:
        if not (g.isdigit() and len(g) < 4) and not _PCI.match(g):
            raise InvalidArgument(f"--gpu {g!r} is neither a CUDA ordinal nor a PCI address "
                                  "(DDDD:BB:DD.F or BB:DD.F)")
    return gpus


def _libcuda():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise Unavailable(f"--gpu needs the CUDA driver (libcuda.so.1): {e}") from None
    if lib.cuInit(0) != 0:
        raise Unavailable("--gpu: cuInit failed (no GPU or driver)")
    return lib


def _cuda_count() -> int:
    n = ctypes.c_int(0)
    _libcuda().cuDeviceGetCount(ctypes.byref(n))
    if n.value == 0:
        raise Unavailable("--gpu all: this host has no CUDA device")
    return n.value


def ordinal(gpu: str) -> int:
    """The CUDA ordinal of a --gpu entry (a PCI address is looked up in the driver)."""
    if gpu.isdigit():
        n = int(gpu)
        if n >= _cuda_count():
            raise InvalidArgument(f"--gpu {gpu}: this host has {_cuda_count()} CUDA devices")
        return n
    dev = ctypes.c_int(-1)
    if _libcuda().cuDeviceGetByPCIBusId(ctypes.byref(dev), gpu.encode()) != 0:
        raise InvalidArgument(f"--gpu {gpu}: no CUDA device at that PCI address")
    return dev.value


def ranks_per_gpu(ranks: int, gpus: int) -> int:
    """How many of this host's ranks use each GPU (the most): under torchrun its
    LOCAL_WORLD_SIZE, in an Indexed Job's pod 1, under the spawner every rank."""
    local = os.environ.get("LOCAL_WORLD_SIZE")
    if local is not None and local.isdigit() and int(local) > 0:
        here = int(local)
    elif "JOB_COMPLETION_INDEX" in os.environ:
        here = 1
    else:
        here = ranks
    return -(-here // gpus) if gpus > 0 else 0


def rank_accelerator(gpus, rank: int, ranks: int) -> "Accelerator":
    """Rank `rank`'s device: gpus[rank % len] (host memory when there are none), its compute a
    kernel only when the rank has the GPU to itself. Ranks sharing one GPU are time-sliced by
    the driver, so a short kernel waits for the others' slices (cosmoflow's 3.5 ms steps
    measured ~40 ms with 16 ranks on one H200) and the step's compute would measure the sharing,
    not the model: they sleep on the host instead, as DLIO's own emulation does."""
    if not gpus:
        return Accelerator(None)
    return Accelerator(gpus[rank % len(gpus)], kernel=ranks_per_gpu(ranks, len(gpus)) == 1)


class Accelerator:
    """One rank's device: `buffer(n)` gives memory the rank's clients move bytes into and out
    of; `compute(seconds)` stands for a step's compute and returns the seconds it took."""

    def __init__(self, gpu: Optional[str], kernel: bool = True):
        self.gpu = gpu
        self._torch = None
        self._cycles_per_s = 0.0
        self.kernel = gpu is not None and kernel  # compute as a GPU kernel, else a host sleep
        if gpu is not None:
            try:
                import torch
            except ImportError:
                raise Unavailable("--gpu needs PyTorch with CUDA in this python3") from None
            if not torch.cuda.is_available():
                raise Unavailable("--gpu: this PyTorch sees no CUDA device")
            self._torch = torch
            self.device = torch.device("cuda", ordinal(gpu))
            torch.cuda.set_device(self.device)
            if self.kernel:
                self._calibrate()

    @property
    def name(self) -> str:
        return f"cuda:{self.device.index}" if self._torch else "host"

    def buffer(self, client: Store, nbytes: int):
        """`nbytes` of the device's memory: a uint8 CUDA tensor, or host memory from `client`
        (which the agent and transport local take without a copy)."""
        if self._torch is not None:
            return self._torch.zeros(nbytes, dtype=self._torch.uint8, device=self.device)
        buf = client.allocate(nbytes)
        # Touched now, so that no page is first faulted in inside the measured run.
        zeros = bytes(min(nbytes, 64 << 20))
        for at in range(0, nbytes, len(zeros)):
            n = min(len(zeros), nbytes - at)
            buf[at:at + n] = zeros[:n]
        return buf

    def _calibrate(self) -> None:
        """How many GPU clock cycles torch's spin kernel burns a second, measured on events."""
        torch = self._torch
        cycles = 20_000_000
        for _ in range(2):  # the first launch pays for loading the kernel
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        self._cycles_per_s = cycles / (ms / 1000.0)

    def compute(self, seconds: float) -> float:
        t0 = time.perf_counter()
        if seconds > 0:
            if self.kernel:
                self._torch.cuda._sleep(max(1, int(self._cycles_per_s * seconds)))
                self._torch.cuda.synchronize(self.device)
            else:
                time.sleep(seconds)
        return time.perf_counter() - t0

    def head(self, buf, offset: int, nbytes: int) -> bytes:
        """The bytes [offset, offset + nbytes) of a buffer of this device, on the host."""
        return self.heads(buf, [(offset, nbytes)])[0]

    def heads(self, buf, spans: List[Tuple[int, int]]) -> List[bytes]:
        """The bytes of each (offset, nbytes) span of a buffer, on the host: from a GPU in one
        gather and one copy (a copy per span costs a synchronisation each)."""
        if self._torch is None:
            return [bytes(buf[a:a + n]) for a, n in spans]
        if not spans:
            return []
        flat = self._torch.cat([buf[a:a + n] for a, n in spans]).cpu().numpy().tobytes()
        out, at = [], 0
        for _, n in spans:
            out.append(flat[at:at + n])
            at += n
        return out
