"""One Stream handed more than the daemon admits at once: 144 gets of 48 MiB into one CUDA tensor
(6.75 GiB, over the default 4 GiB max_inflight_bytes). Every get must
succeed (the client holds what the daemon would refuse); prints the rate.
Usage: python3 bench/stream_burst.py HOST:PORT  (a daemon with a 7 GiB volume vol0)"""
import sys, time, torch, gdrstore
addr = sys.argv[1]
n, size = 144, 48 << 20
t = torch.empty(n * size, dtype=torch.uint8, device="cuda")
with gdrstore.Client(addr, timeout=300) as c:
    c.register(t)
    t0 = time.monotonic()
    with c.stream() as s:
        futs = [s.get("vol0", i * size, t[i * size:(i + 1) * size]) for i in range(n)]
        got = [f.result(timeout=600) for f in futs]
    dt = time.monotonic() - t0
    torch.cuda.synchronize()
    assert got == [size] * n, got[:4]
    gdrstore.verify(t[:size], "vol0", 0)
    gdrstore.verify(t[-size:], "vol0", (n - 1) * size)
    print(f"burst: {n} x 48 MiB gets on one Stream: all OK, {n*size/dt/1e9:.2f} GB/s, "
          f"waited in client window (limits: {c.info()['limits']})")
