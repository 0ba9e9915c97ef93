#!/usr/bin/python3
"""Plots gdr_bench's scale group: aggregate GB/s against client processes, the product beside
raw loopback TCP with a stream per tcp link the clients had, one panel per direction (Write:
store -> clients, Read: clients -> store).

usage: plot_scale.py DATA.json OUT.png

DATA.json is what `gdr_bench --only scale` writes beside its plot (scale.json by default), or a
whole `gdr_bench --json` document (its "scale" object is used). Exit status 3 when matplotlib
cannot be imported (Debian: apt install python3-matplotlib), 2 on bad usage or data.
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import matplotlib
    except ImportError:
        print("plot_scale.py: matplotlib is not installed (Debian: apt install "
              "python3-matplotlib)", file=sys.stderr)
        return 3
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    with open(argv[1]) as f:
        doc = json.load(f)
    scale = doc.get("scale", doc)
    bulk = scale.get("bulk") if isinstance(scale, dict) else None
    if not bulk:
        print(f"plot_scale.py: {argv[1]} has no scale bulk lines", file=sys.stderr)
        return 2

    settings = scale.get("settings", {})
    size_mib = settings.get("size", 0) / (1 << 20)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, op, title in ((axes[0], "write", "Write (store -> clients)"),
                          (axes[1], "read", "Read (clients -> store)")):
        rows = sorted((r for r in bulk if r["op"] == op), key=lambda r: r["clients"])
        clients = [r["clients"] for r in rows]
        ax.plot(clients, [r["gbps"] for r in rows], "o-", label="gdrstored tcp")
        ax.plot(clients, [r["baseline_gbps"] for r in rows], "s--",
                label="raw loopback TCP, a stream per client link")
        if clients:
            ax.set_xscale("log", base=2)
            ax.set_xticks(clients)
            ax.set_xticklabels([str(c) for c in clients])
        ax.set_title(title)
        ax.set_xlabel("client processes")
        ax.grid(True, alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("aggregate GB/s (1e9 B/s)")
    axes[0].set_ylim(bottom=0)
    fig.suptitle(f"gdr_bench scale: {size_mib:g} MiB ops, qd {settings.get('qd', '?')} per "
                 f"client, nproc {scale.get('nproc', '?')}, median of "
                 f"{settings.get('repeats', '?')}")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
