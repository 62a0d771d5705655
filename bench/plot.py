#!/usr/bin/env python3
"""Draw the benchmark charts from the CSVs bench/run.sh writes, in the style of the MRG
papers: throughput bars (msgs/s and MB/s) by message size for each broker beside the
netbench relay ceiling, latency by message size (avg and p99) for each broker beside the
TCP baselines, and the npubs=nsubs x qt points.

    plot.py OUT_DIR
"""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchdata as bd  # noqa: E402

MB = 1024 * 1024


def bars(series, sizes, ylabel, title, outfile):
    """Grouped bars: one group per size, one bar per series (in the given order); log
    scale, since msgs/s spans orders of magnitude across sizes."""
    series = {k: v for k, v in series.items() if any(x for x in v.values())}
    if not series:
        return
    fig, ax = plt.subplots(figsize=(13, 5.5))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [j + i * width for j in range(len(sizes))]
        ax.bar(xs, [values.get(s) or 0 for s in sizes], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(sizes))])
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(outfile, dpi=100)
    plt.close(fig)
    print(f"wrote {outfile}")


def throughput(out):
    perf = bd.perftest_points(out)
    net = bd.netbench_throughput(out)
    msgs, mbytes = {}, {}
    for b in bd.brokers(out):
        pts = {s: p for (br, s, n, qt), p in perf.items() if br == b and n == 1 and qt == 1}
        if not pts:
            continue
        label = f"{b} (perftest 1 pub/1 sub/1 queue)"
        msgs[label] = {s: p.msgs_per_sec for s, p in pts.items()}
        mbytes[label] = {s: (p.msgs_per_sec or 0) * s / MB for s, p in pts.items()}
    for batch in (1, 64):
        label = f"netbench relay, {batch} msg/write (ceiling)"
        rows = {s: r for (t, bt, s), r in net.items() if t == "relay" and bt == batch}
        if rows:
            msgs[label] = {s: r["msgs_per_sec"] for s, r in rows.items()}
            mbytes[label] = {s: r["mbytes_per_sec"] for s, r in rows.items()}
    sizes = sorted({s for v in msgs.values() for s in v})
    bars(msgs, sizes, "messages/s through the broker (transfers/s / 2)",
         "Throughput by message size: messages/s", Path(out) / "throughput_msgs.png")
    bars(mbytes, sizes, "payload MB/s (2^20) through the broker",
         "Throughput by message size: MB/s", Path(out) / "throughput_mbytes.png")


def latency(out):
    lat = bd.latency_points(out)
    net = bd.netbench_latency(out)
    if not lat and not net:
        return
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), sharey=True)
    for ax, col, name in ((axes[0], "avg_ms", "average"), (axes[1], "p99_ms", "p99")):
        for b in bd.brokers(out):
            for view, style in (("corrected", "-o"), ("actual", ":o")):
                pts = sorted((s, r) for (br, s, v), r in lat.items() if br == b and v == view and r)
                if pts:
                    what = "from intended send time" if view == "corrected" else "from actual send time"
                    ax.plot([s for s, _ in pts], [r[col] for _, r in pts], style,
                            label=f"{b} 2-hop at 10k msg/s ({what})")
        for (test, rate), style, label in (
            (("pingpong", 0), "--s", "TCP ping-pong round trip, back-to-back"),
            (("pingpong", 10000), "--^", "TCP ping-pong round trip, 10k/s"),
            (("relay-latency", 10000), "--v", "TCP relay one way (2 hops), 10k/s"),
        ):
            pts = sorted((s, r) for (t, rt, s), r in net.items() if (t, rt) == (test, rate))
            if pts:
                ax.plot([s for s, _ in pts], [r[col] for _, r in pts], style, label=label, alpha=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_title(f"Latency by message size: {name}")
        ax.grid(which="both", alpha=0.3)
    axes[0].set_ylabel("latency (ms)")
    axes[1].legend(fontsize="x-small")
    fig.tight_layout()
    outfile = Path(out) / "latency.png"
    fig.savefig(outfile, dpi=100)
    plt.close(fig)
    print(f"wrote {outfile}")


def scaling(out):
    perf = bd.perftest_points(out)
    configs = sorted({(s, n, qt) for (b, s, n, qt) in perf if (n, qt) != (1, 1)})
    configs = [(s, 1, 1) for s in sorted({c[0] for c in configs})] + configs
    if len(configs) <= 1:
        return
    fig, ax = plt.subplots(figsize=(12, 5))
    names = bd.brokers(out)
    width = 0.8 / max(1, len(names))
    for i, b in enumerate(names):
        ys = [perf[(b, *c)].transfers_per_sec if (b, *c) in perf else 0 for c in configs]
        ax.bar([j + i * width for j in range(len(configs))], [y or 0 for y in ys], width, label=b)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(configs))])
    ax.set_xticklabels([f"{s} B\n{n}x{n}, qt {qt}" for s, n, qt in configs], fontsize="small")
    ax.set_ylabel("transfers/s (perftest)")
    ax.set_yscale("log")
    ax.set_title("perftest: npubs = nsubs per queue, qt queues")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    outfile = Path(out) / "scaling.png"
    fig.savefig(outfile, dpi=100)
    plt.close(fig)
    print(f"wrote {outfile}")


def amqp091(out):
    """ferryd beside RabbitMQ over 0-9-1: one group per (persistent, confirms, size)."""
    pts = bd.amqp091_points(out)
    measured = {k: p for k, p in pts.items() if p.ok}
    if not measured:
        return
    names = []
    for (b, *_rest) in pts:
        if b not in names:
            names.append(b)
    configs = sorted({(pe, c, s) for (_, pe, c, s) in pts}, key=lambda k: (k[0] == "yes", k[1], k[2]))
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / max(1, len(names))
    for i, b in enumerate(names):
        ys = [measured[(b, *c)].transfers_per_sec if (b, *c) in measured else 0 for c in configs]
        ax.bar([j + i * width for j in range(len(configs))], ys, width, label=b)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(configs))])
    ax.set_xticklabels([f"{s} B\n{'persistent' if pe == 'yes' else 'transient'}\n"
                        f"{'confirms ' + str(c) if c else 'no confirms'}" for pe, c, s in configs],
                       fontsize="small")
    ax.set_ylabel("transfers/s (perftest over AMQP 0-9-1)")
    ax.set_yscale("log")
    ax.set_title("AMQP 0-9-1, same harness: 1 publisher, 1 subscriber (ack every 100), 1 queue")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    outfile = Path(out) / "amqp091.png"
    fig.savefig(outfile, dpi=100)
    plt.close(fig)
    print(f"wrote {outfile}")


def persistent(out):
    """Persistent messages/s by size and publishers, beside the device's syncs/s."""
    pts = {k: p for k, p in bd.persistent_points(out).items() if p.ok}
    if not pts:
        return
    fsync = bd.fsync_rates(out)
    configs = sorted({(s, n) for (_, _, s, n) in pts})
    fig, ax = plt.subplots(figsize=(10, 5))
    xs = range(len(configs))
    ax.bar([x - 0.2 for x in xs], [next((p.msgs_per_sec for (b, pr, s, n), p in pts.items()
                                          if (s, n) == c), 0) for c in configs], 0.4,
           label="ferryd persistent messages/s (perftest --durable yes)")
    ax.bar([x + 0.2 for x in xs], [(fsync.get(s) or {}).get("syncs_per_sec") or 0 for s, _ in configs], 0.4,
           label="device: append + fdatasync per second (netbench fsync)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{s} B, {n} pub" for s, n in configs])
    ax.set_yscale("log")
    ax.set_ylabel("per second")
    ax.set_title("Persistent messages against the device's sync rate")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    outfile = Path(out) / "persistent.png"
    fig.savefig(outfile, dpi=100)
    plt.close(fig)
    print(f"wrote {outfile}")


def amqp1(out):
    """AMQP 1.0: throughput by size for each broker and settlement mode, and the 2-hop
    latency (average and p99) by size for each broker."""
    pts = {k: p for k, p in bd.amqp1_points(out).items() if p.ok}
    lat = {k: r for k, r in bd.amqp1_latency(out).items() if r and k[3] == "corrected"}
    if not pts and not lat:
        return
    names = []
    for (b, *_rest) in list(pts) + list(lat):
        if b not in names:
            names.append(b)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 9))
    sizes = sorted({s for (_, _, s) in pts})
    series = [(b, m) for m in ("unsettled", "settled") for b in names
              if any(k[:2] == (b, m) for k in pts)]
    width = 0.8 / max(1, len(series))
    for i, (b, m) in enumerate(series):
        ys = [pts[(b, m, s)].transfers_per_sec if (b, m, s) in pts else 0 for s in sizes]
        top.bar([j + i * width for j in range(len(sizes))], ys, width, label=f"{b}, {m}")
    top.set_xticks([j + 0.4 - width / 2 for j in range(len(sizes))])
    top.set_xticklabels([str(s) for s in sizes])
    top.set_xlabel("message size (bytes)")
    top.set_ylabel("transfers/s (perftest over AMQP 1.0)")
    top.set_yscale("log")
    top.set_title("AMQP 1.0, same harness: 1 publisher, 1 subscriber, 1 queue")
    top.grid(axis="y", which="both", alpha=0.3)
    top.legend(fontsize="small")
    for b in names:
        for col, style in (("avg_ms", "-o"), ("p99_ms", ":^")):
            xs = sorted(s for (br, _, s, _) in lat if br == b)
            if xs:
                bottom.plot(xs, [lat[(b, "prefetch100", s, "corrected")][col] for s in xs], style,
                            label=f"{b} {col[:-3]}")
    bottom.set_xscale("log", base=2)
    bottom.set_yscale("log")
    bottom.set_xlabel("message size (bytes)")
    bottom.set_ylabel("2-hop latency at 10k msg/s (ms)")
    bottom.grid(which="both", alpha=0.3)
    bottom.legend(fontsize="small")
    fig.tight_layout()
    outfile = Path(out) / "amqp1.png"
    fig.savefig(outfile, dpi=100)
    plt.close(fig)
    print(f"wrote {outfile}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    throughput(out)
    latency(out)
    scaling(out)
    amqp091(out)
    persistent(out)
    amqp1(out)


if __name__ == "__main__":
    main()
