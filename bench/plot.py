#!/usr/bin/env python3
"""Draw the benchmark charts from bench/out/*.csv, in the style of the MRG papers:
throughput bars (msgs/s and MB/s) by message size, and latency by message size.

    plot.py OUT_DIR
"""
import csv
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def bars(series, sizes, ylabel, title, outfile):
    """Grouped bars: one group per size, one bar per series; log scale, since msgs/s spans
    four orders of magnitude across sizes and batch settings."""
    if not series:
        return
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(sorted(series.items())):
        xs = [j + i * width for j in range(len(sizes))]
        ax.bar(xs, [values.get(s, 0) for s in sizes], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(sizes))])
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(outfile, dpi=110)
    plt.close(fig)
    print(f"wrote {outfile}")


def throughput(out):
    rows = read_rows(out / "throughput.csv")
    msgs, mbytes = defaultdict(dict), defaultdict(dict)
    for r in rows:
        label = f"{r['test']} batch {r['batch']}"
        size = int(r["size"])
        msgs[label][size] = float(r["msgs_per_sec"])
        mbytes[label][size] = float(r["mbytes_per_sec"])
    for r in read_rows(out / "perftest.csv"):
        label = f"perftest {r['broker']}"
        size = int(r["size"])
        msgs[label][size] = float(r["transfers_per_sec"])
        mbytes[label][size] = float(r["mbytes_per_sec"])
    sizes = sorted({s for v in msgs.values() for s in v})
    bars(msgs, sizes, "messages/s", "Throughput by message size", out / "throughput_msgs.png")
    bars(mbytes, sizes, "Mbytes/s (2^20)", "Throughput by message size", out / "throughput_mbytes.png")


def latency(out):
    rows = read_rows(out / "latency.csv")
    if not rows:
        return
    by_test = defaultdict(list)
    for r in rows:
        by_test[r["test"]].append(r)
    fig, ax = plt.subplots(figsize=(10, 5))
    for test, rs in sorted(by_test.items()):
        rs.sort(key=lambda r: int(r["size"]))
        sizes = [int(r["size"]) for r in rs]
        rate = rs[0]["rate"]
        what = "round trip" if test == "pingpong" else "one way"
        pace = "back-to-back" if rate == "0" else f"{rate} msg/s"
        for col, style in (("p50_ms", "-o"), ("p99_ms", "--s"), ("avg_ms", ":^")):
            ax.plot(sizes, [float(r[col]) for r in rs], style,
                    label=f"{test} {col[:-3]} ({what}, {pace})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency by message size")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    outfile = out / "latency.png"
    fig.savefig(outfile, dpi=110)
    plt.close(fig)
    print(f"wrote {outfile}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    throughput(out)
    latency(out)


if __name__ == "__main__":
    main()
