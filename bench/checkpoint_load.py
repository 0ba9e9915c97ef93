#!/usr/bin/env python3
"""A checkpoint shard loaded into GPU tensors, first and later loads, against safetensors' own
loader (`safetensors.torch.load_file(device="cuda")`) and a pinned host->GPU copy, in one run:

  (a) a freshly started gdrstored's FIRST load over local, page cache warm, against
      safetensors' load with the page cache warm (target >= 3x);
  (b) the page cache cold (the file dropped with fsync + posix_fadvise(DONTNEED), its residency
      checked with mincore): safetensors' load and a freshly started daemon's first load
      (target >= 0.9x);
  (c) later loads, once the daemon has page-locked the volume, against the pinned copy (target
      >= 0.9x), over every transport of --transports (and through gdragent when given).

Every first load is a new daemon serving the shard's directory (`--volume-dir`, the file a
read-only volume named by its file name); each round of (a) and (b) starts one. Every tensor
gdrstore loaded, first or later, is compared bit for bit with safetensors' own. The shard is
Llama-like: per layer, q/k/v/o projections, gate/up/down MLP projections and two norms in
bfloat16, scaled to --size-gib with --tensors tensors in all.

usage: bench/checkpoint_load.py --gdrstored BIN [--gdragent BIN] [--size-gib 6.5]
       [--tensors 144] [--dir DIR] [--rounds 2] [--transports local,tcp[,agent]]
       [--daemon-arg=--local-lock-idle-ms=0 ...] [--lock-timeout-s 300] [--dry-run]
--dry-run prints what would run, without torch or a GPU. Needs torch with CUDA and safetensors;
GDRSTORE_LIBRARY names libgdrclient.so.1 when it is not beside the package."""

import argparse
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

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
        f.flush()
        os.fsync(f.fileno())
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


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_fraction(path):
    """The part of `path` in the page cache (mincore of a fresh read-only mapping)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0.0
    page = os.sysconf("SC_PAGE_SIZE")
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap for mincore")
        try:
            pages = (size + page - 1) // page
            vec = ctypes.create_string_buffer(pages)
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return sum(b & 1 for b in vec.raw) / pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def drop_cache(path):
    """The file out of the page cache: fsync, posix_fadvise(DONTNEED); as root, when pages stay
    (another mapping holds them), `echo 1 > /proc/sys/vm/drop_caches` too. Returns what is left
    resident (0..1)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    left = resident_fraction(path)
    if left > 0.01 and os.geteuid() == 0:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        left = resident_fraction(path)
    return left


class Daemon:
    """One gdrstored serving `shard_dir`, started now and stopped by stop() (which, as the
    daemon lets the file volume go, drops the file from the page cache)."""

    def __init__(self, gdrstored, shard_dir, work, extra, tag):
        self.port_file = os.path.join(work, f"port-{tag}")
        self.sock = os.path.join(work, f"local-{tag}.sock")
        self.log_path = os.path.join(work, f"gdrstored-{tag}.log")
        for p in (self.port_file, self.sock):
            if os.path.exists(p):
                os.unlink(p)
        self.argv = [gdrstored, "--listen", "127.0.0.1:0", "--port-file", self.port_file,
                     "--volume-dir", shard_dir, "--local-socket", self.sock,
                     "--max-op-size", "1GiB", "--log-level", "info"] + list(extra)
        self.proc = None
        self.address = None
        self.started_at = None

    def start(self):
        log = open(self.log_path, "w")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(self.port_file) and os.path.getsize(self.port_file) > 0:
                self.address = "127.0.0.1:" + open(self.port_file).read().strip()
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        self.proc.kill()
        sys.exit("gdrstored did not start:\n" + open(self.log_path).read())

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)
        self.proc = None

    def lock_lines(self):
        with open(self.log_path) as f:
            return [ln.rstrip() for ln in f if "page-lock" in ln or "bounce" in ln]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gdrstored", required=True)
    ap.add_argument("--gdragent")
    ap.add_argument("--size-gib", type=float, default=6.5)
    ap.add_argument("--tensors", type=int, default=144)
    ap.add_argument("--dir", default=None, help="where the shard is written (a disk, for (b))")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds of each measurement; a first load is a new daemon each round")
    ap.add_argument("--transports", default="local,tcp",
                    help="later loads over these (local, tcp, agent); first loads are local")
    ap.add_argument("--daemon-arg", action="append", default=[],
                    help="an extra gdrstored argument (repeatable), e.g. "
                         "--daemon-arg=--local-lock-idle-ms=0")
    ap.add_argument("--lock-timeout-s", type=float, default=300,
                    help="how long (c) waits for the daemon to page-lock the volume")
    ap.add_argument("--dry-run", action="store_true",
                    help="print what would run; needs neither torch nor a GPU")
    args = ap.parse_args()
    transports = [t for t in args.transports.split(",") if t]
    for t in transports:
        if t not in ("local", "tcp", "agent"):
            sys.exit(f"--transports: unknown transport {t!r} (local, tcp, agent)")
    if "agent" in transports and not args.gdragent:
        sys.exit("--transports agent needs --gdragent")
    if args.rounds < 1:
        sys.exit("--rounds must be >= 1")

    if args.dry_run:
        d = Daemon(args.gdrstored, "SHARD_DIR", "WORK", args.daemon_arg, "N")
        print("checkpoint_load (dry run):")
        print(f"  shard: {args.size_gib} GiB, {args.tensors} bf16 tensors in WORK/shard/")
        print("  daemon, fresh for every first load:", " ".join(d.argv))
        print(f"  (a) x{args.rounds}: safetensors load_file warm; warm the file, start a daemon, "
              "time its first load_safetensors over local; verify")
        print(f"  (b) x{args.rounds}: drop the file (fsync, fadvise DONTNEED, mincore), time "
              "load_file cold; drop it, start a daemon, time its first load cold; verify")
        print(f"  (c) warm the file, start a daemon, first load, wait until GetStats says the "
              f"volume is page-locked (<= {args.lock_timeout_s:.0f} s), then x{args.rounds}: "
              f"pinned copy, loads over {','.join(transports)}; verify")
        return

    import torch
    from safetensors.torch import load_file
    import gdrstore
    import gdrstore.torch as gt

    work = tempfile.mkdtemp(prefix="gdr-ckpt-", dir=args.dir)
    shard_dir = os.path.join(work, "shard")
    os.mkdir(shard_dir)
    path = os.path.join(shard_dir, "model-00001-of-00002.safetensors")
    write_shard(path, llama_like_shapes(int(args.size_gib * GiB), args.tensors))
    size = os.path.getsize(path)
    data_start, header = read_header(path)
    nbytes = size - data_start
    volume = os.path.basename(path)
    print(f"checkpoint_load: {size / GiB:.2f} GiB shard, {len(header)} bf16 tensors, "
          f"{torch.cuda.get_device_name(0)}, {os.cpu_count()} CPUs, shard in {shard_dir}; "
          f"daemon args: {' '.join(args.daemon_arg) or '(defaults)'}")

    def timed(fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t0, r

    def rate(t):
        return nbytes / t / 1e9

    warm(path)
    reference = load_file(path, device="cuda")  # what every gdrstore load must equal

    def verify(what, loaded):
        # As 16-bit integers: random bf16 bit patterns hold NaNs, which equal nothing.
        bad = [k for k in reference
               if k not in loaded or
               not torch.equal(reference[k].view(torch.int16), loaded[k].view(torch.int16))]
        if bad:
            sys.exit(f"{what}: {len(bad)} tensors differ from safetensors' own, e.g. {bad[0]}")

    def first_load(tag, cold):
        """A new daemon's first load over local: its time, paths, locked bytes at its end."""
        if cold:
            left = drop_cache(path)
        else:
            warm(path)
            left = resident_fraction(path)
        d = Daemon(args.gdrstored, shard_dir, work, args.daemon_arg, tag).start()
        try:
            with gdrstore.Client(d.address, transport="local") as c:
                paths = set()
                t, loaded = timed(lambda: gt.load_safetensors(c, volume, "cuda", paths=paths))
                locked = volume_locked(c)
            verify(f"first load ({tag})", loaded)
            del loaded
        finally:
            d.stop()
        return t, paths, locked, left

    def volume_locked(c):
        for v in c.stats().get("volumes", []):
            if v.get("name") == volume:
                return int(v.get("page_locked_bytes", v.get("pageLockedBytes", 0)))
        return 0

    times = {}
    notes = []
    try:
        # (a) page cache warm: safetensors, then a fresh daemon's first load.
        for r in range(args.rounds):
            warm(path)
            t, st = timed(lambda: load_file(path, device="cuda"))
            del st
            times.setdefault("safetensors warm", []).append(t)
            t, paths, locked, left = first_load(f"warm{r}", cold=False)
            times.setdefault("first load warm", []).append(t)
            notes.append(f"first load warm, round {r}: {rate(t):.2f} GB/s, "
                         f"{left * 100:.0f}% resident before, {locked / GiB:.2f} GiB page-locked "
                         f"at its end, {', '.join(sorted(paths))}")
        # (b) page cache cold: safetensors, then a fresh daemon's first load.
        for r in range(args.rounds):
            left = drop_cache(path)
            t, st = timed(lambda: load_file(path, device="cuda"))
            del st
            times.setdefault("safetensors cold", []).append(t)
            notes.append(f"safetensors cold, round {r}: {rate(t):.2f} GB/s, "
                         f"{left * 100:.1f}% resident before")
            t, paths, locked, left = first_load(f"cold{r}", cold=True)
            times.setdefault("first load cold", []).append(t)
            notes.append(f"first load cold, round {r}: {rate(t):.2f} GB/s, "
                         f"{left * 100:.1f}% resident before, {locked / GiB:.2f} GiB "
                         f"page-locked at its end")
        # (c) later loads, once the volume is page-locked.
        warm(path)
        d = Daemon(args.gdrstored, shard_dir, work, args.daemon_arg, "later").start()
        agent = None
        agent_sock = os.path.join(work, "agent.sock")
        try:
            if "agent" in transports:
                agent = subprocess.Popen(
                    [args.gdragent, "--daemon", d.address, "--transport", "local",
                     "--socket", agent_sock, "--log-level", "warning"],
                    stdout=open(os.path.join(work, "gdragent.log"), "w"),
                    stderr=subprocess.STDOUT)
                deadline = time.monotonic() + 60
                while not os.path.exists(agent_sock) and time.monotonic() < deadline:
                    time.sleep(0.05)

            def client(tr):
                return gdrstore.Client(agent=agent_sock) if tr == "agent" else \
                    gdrstore.Client(d.address, transport=tr)

            with client("local") as c:
                loaded = gt.load_safetensors(c, volume, "cuda")
                verify("first load (later daemon)", loaded)
                del loaded
                t0 = time.monotonic()
                locked = volume_locked(c)
                while locked < size and time.monotonic() - t0 < args.lock_timeout_s:
                    time.sleep(0.1)
                    locked = volume_locked(c)
            since_start = time.monotonic() - d.started_at
            notes.append(f"volume page-locked: {locked / GiB:.2f} of {size / GiB:.2f} GiB, "
                         f"{since_start:.1f} s after the daemon started")
            if locked < size:
                notes.append("  NOT fully locked within --lock-timeout-s: later loads are "
                             "partly staged")
            seen_paths = {}
            for _ in range(args.rounds):
                pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
                t, dev = timed(lambda: pinned.to("cuda", non_blocking=True))
                times.setdefault("pinned copy", []).append(t)
                del dev, pinned
                for tr in transports:
                    with client(tr) as c:
                        paths = set()
                        t, loaded = timed(lambda: gt.load_safetensors(c, volume, "cuda",
                                                                      paths=paths))
                        times.setdefault(f"later {tr}", []).append(t)
                        seen_paths[tr] = ", ".join(sorted(paths))
                        verify(f"later load over {tr}", loaded)
                        del loaded
        finally:
            if agent is not None:
                agent.send_signal(signal.SIGTERM)
                agent.wait(timeout=60)
            d.stop()
        lock_lines = d.lock_lines()

        best = {k: rate(min(v)) for k, v in times.items()}
        st_warm, st_cold, link = best["safetensors warm"], best["safetensors cold"], \
            best["pinned copy"]
        print("  every tensor gdrstore loaded equals safetensors' own")
        print(f"  {'measurement (best of ' + str(args.rounds) + ')':<44} {'GB/s':>7}   ratio")
        print(f"  {'safetensors load_file, warm':<44} {st_warm:7.2f}")
        print(f"  {'(a) fresh daemon, first load, warm':<44} {best['first load warm']:7.2f}   "
              f"{best['first load warm'] / st_warm:5.2f}x safetensors warm (target >= 3x)")
        print(f"  {'safetensors load_file, cold':<44} {st_cold:7.2f}")
        print(f"  {'(b) fresh daemon, first load, cold':<44} {best['first load cold']:7.2f}   "
              f"{best['first load cold'] / st_cold:5.2f}x safetensors cold (target >= 0.9x)")
        print(f"  {'pinned host->GPU copy':<44} {link:7.2f}")
        for tr in transports:
            r = best[f"later {tr}"]
            target = " (target >= 0.9x)" if tr == "local" else ""
            print(f"  {'(c) later loads over ' + tr:<44} {r:7.2f}   {r / link:5.2f}x pinned "
                  f"copy{target}, {r / st_warm:5.2f}x safetensors warm   {seen_paths[tr]}")
        for n in notes:
            print("  " + n)
        for ln in lock_lines:
            print("  daemon: " + ln)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
