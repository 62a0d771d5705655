#!/usr/bin/env python3
"""Write BENCHMARKS.md from the CSVs (and charts) of one bench/run.sh run.

    report.py RESULTS_DIR OUTPUT.md

Every figure in the report is read from RESULTS_DIR; the charts are linked relative to
OUTPUT.md's directory. Standard library only.
"""
import os
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchdata as bd  # noqa: E402

# The project's targets (the issue), and where the qpidd figures come from.
QPIDD_PAPERS_TRANSFERS = 322_000  # MRG papers: qpid-perftest 256 B, 1 pub/1 sub/1 queue
QPIDD_NOTES_TRANSFERS = 165_000  # PERFORMANCE-NOTES: qpidd 1.40 here, median of 140k-345k
QPIDD_PAPERS_LAT_AVG_MS = 0.169  # MRG papers: qpid-latency-test 256 B at 10k msg/s, average
QPIDD_NOTES_LAT_AVG_MS = 0.28  # PERFORMANCE-NOTES: the same here, median of 0.16-0.50 ms
THROUGHPUT_FACTOR = 2
LATENCY_FACTOR = 0.5
P99_FACTOR = 3
HEADLINE_SIZE = 256
MB = 1024 * 1024
PERSISTENT_VS_RABBITMQ = 5  # issue 4: persistent, confirmed, ≥ 5× RabbitMQ's confirmed rate
PERSISTENT_VS_RABBITMQ_2 = 10  # issue 15 raises it to 10×
CLUSTER_VS_RABBITMQ = 3  # issue 13: replicated, confirmed, ≥ 3× RabbitMQ quorum queues
TAIL_ANALYSIS = Path(__file__).resolve().parent / "LATENCY-TAIL.md"


# ---------------------------------------------------------------- formatting
def f_rate(v):
    return "—" if v is None else f"{v:,.0f}"


def f_mb(v):
    return "—" if v is None else (f"{v:,.1f}" if v >= 10 else f"{v:.2f}")


def f_ms(v):
    if v is None:
        return "—"
    return f"{v:.3f}" if v >= 0.1 else f"{v:.4f}"


def f_x(v):
    if v is None:
        return "—"
    return f"{v:.2g}×" if v < 0.1 else (f"{v:.2f}×" if v < 10 else f"{v:.0f}×")


def f_pct(v):
    return "—" if v is None else f"{v:.0f}%"


def f_kib(v):
    return "—" if v is None else (f"{v:,.1f} KiB" if v < 1024 else f"{v / 1024:,.1f} MiB")


def f_secs(v):
    return "—" if v is None else f"{v:.2f} s"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def met(ok):
    return "—" if ok is None else ("**met**" if ok else "**not met**")


class Data:
    def __init__(self, out):
        out = Path(out)
        self.out = out
        self.meta = bd.meta(out)
        self.perf = bd.perftest_points(out)
        self.lat = bd.latency_points(out)
        self.netlat = bd.netbench_latency(out)
        self.nettp = bd.netbench_throughput(out)
        self.brokers = bd.brokers(out)
        self.others = [b for b in self.brokers if b != "ferryd"]
        self.amqp091 = bd.amqp091_points(out)
        self.amqp091_lat = bd.variant_latency(out, "amqp091_latency.csv", "persistent")
        self.persistent = bd.persistent_points(out)
        self.persistent_lat = bd.variant_latency(out, "persistent_latency.csv", "protocol")
        self.fsync = bd.fsync_rates(out)
        self.amqp1 = bd.amqp1_points(out)
        self.amqp1_lat = bd.amqp1_latency(out)
        self.amqp1_meta = bd.section_meta(out, "amqp1")
        self.cluster = bd.cluster_points(out)
        self.cluster_meta = bd.section_meta(out, "cluster")
        self.relay_bound, self.relay_bound_status = bd.relay_bound(out)
        self.relay_bound_meta = bd.section_meta(out, "bounds")
        self.scale = bd.scale_points(out)
        self.scale_load = bd.scale_loads(out)
        self.scale_meta = bd.section_meta(out, "scale")
        self.scale_cpu = bd.scale_cpu(out)
        self.memory = bd.memory_rows(out)
        self.memory_meta = bd.section_meta(out, "memory")
        sizes = {k[1] for k in self.perf} | {k[1] for k in self.lat} | {k[2] for k in self.nettp}
        self.sizes = sorted(sizes)

    def p(self, broker, size, n=1, qt=1):
        return self.perf.get((broker, size, n, qt))

    def tps(self, broker, size, n=1, qt=1):
        p = self.p(broker, size, n, qt)
        return p.transfers_per_sec if p else None

    def l(self, broker, size, view="corrected"):
        return self.lat.get((broker, size, view))

    def lv(self, broker, size, col, view="corrected"):
        r = self.l(broker, size, view)
        return r.get(col) if r else None

    def net_l(self, test, rate, size, col):
        r = self.netlat.get((test, rate, size))
        return r.get(col) if r else None

    def net_t(self, test, batch, size, col="msgs_per_sec"):
        r = self.nettp.get((test, batch, size))
        return r.get(col) if r else None


# ---------------------------------------------------------------- sections
def section_run(d, md_dir):
    m = {k: v for k, v in d.meta.items() if v != ""}

    class Meta(dict):
        def get(self, k, default="—"):
            return dict.get(self, k, default)

    m = Meta(m)
    rows = [
        ("date", m.get("date")),
        ("machine", f"{m.get('host_nproc')} CPUs ({m.get('host_cpu')}), {m.get('host_memory')} RAM"),
        ("kernel / OS", f"{m.get('host_kernel')} / {m.get('host_os')}"),
        ("ferryd", f"{m.get('ferryd_version')}, options {m.get('ferryd_options')}"),
        ("harness", f"{m.get('ferry_version')} (`ferry` from crates/tools), {m.get('rustc')}"),
        ("source", f"commit {m.get('git_commit')}; {m.get('git_dirty')} (others work in this checkout)"),
    ]
    if "brokerj_version" in m:
        rows.append(("second broker", f"{m['brokerj_version']}; {m.get('java_version')}; JVM options `{m.get('brokerj_java_opts')}`"))
    if "rabbitmq_version" in m:
        rows.append(("AMQP 0-9-1 peer", f"{m['rabbitmq_version']}; Erlang {m.get('erlang_version')}"))
    if "ferryd_store" in m:
        rows.append(("ferryd durable store", "yes (`--data-dir`)" if m["ferryd_store"] == "yes"
                     else "no (this ferryd has no `--data-dir`: persistent rows not available)"))
    rows += [
        ("invocation", f"`{m.get('invocation')}`" + (" (BENCH_QUICK=1)" if m.get("quick") == "1" else "")),
        ("run length", f"{m.get('duration_secs')} s of measurement (build, charts and report not included)"),
        ("settings", f"perftest points sized to ~{m.get('perf_secs')} s, {m.get('perf_repeats')} repetitions (median shown); "
                     f"latency-test {m.get('lat_secs')} s per size; netbench stream/relay {m.get('net_secs')} s each"
                     + (f"; other brokers' --count capped at {m.get('other_max_count')}"
                        if m.get("other_max_count") not in (None, "", "0") else "")),
    ]
    s = "## The run\n\n" + table(["", ""], rows)
    cmds = command_templates(d.out / "commands.txt")
    if cmds:
        s += ("\nThe commands, as run (sizes, counts, ports and queue names vary per point; every "
              "line run is in [commands.txt](" + rel(d.out / "commands.txt", md_dir) + ")):\n\n```sh\n"
              + "\n".join(cmds) + "\n```\n")
    return s


def command_templates(path):
    """One line per kind of command: the first one run, with per-point values left in."""
    if not path.exists():
        return []
    seen, out = set(), []
    for line in path.read_text().splitlines():
        key = re.sub(r"--(size|count|base-name|npubs|nsubs|qt|time-limit|rate|batch) \S+", r"--\1 _", line)
        key = re.sub(r"-p \d+", "-p _", key)
        if key not in seen:
            seen.add(key)
            out.append(line)
    return out


def rel(path, md_dir):
    return os.path.relpath(path, md_dir).replace(os.sep, "/")


def targets(d):
    """[(target, threshold text, measured text, ok)], computed from the numbers."""
    s = HEADLINE_SIZE
    rows = []
    t = d.tps("ferryd", s)
    for ref, name in ((QPIDD_PAPERS_TRANSFERS, "the MRG papers' qpidd"),
                      (QPIDD_NOTES_TRANSFERS, "qpidd 1.40 here (PERFORMANCE-NOTES median)")):
        need = THROUGHPUT_FACTOR * ref
        rows.append((f"throughput at {s} B, 1 pub/1 sub/1 queue ≥ {THROUGHPUT_FACTOR}× {name} ({ref:,} transfers/s)",
                     f"≥ {need:,} transfers/s", f"{f_rate(t)} transfers/s",
                     None if t is None else t >= need))
    for view in ("corrected", "actual"):
        avg = d.lv("ferryd", s, "avg_ms", view)
        how = "from intended send time" if view == "corrected" else "from actual send time (as qpid-latency-test)"
        for ref, name in ((QPIDD_PAPERS_LAT_AVG_MS, "the MRG papers' qpidd"),
                          (QPIDD_NOTES_LAT_AVG_MS, "qpidd here (PERFORMANCE-NOTES median)")):
            need = LATENCY_FACTOR * ref
            rows.append((f"2-hop latency at 10k msg/s, {s} B, average ≤ ½ {name} ({ref} ms); {how}",
                         f"≤ {need:.4f} ms", f"{f_ms(avg)} ms", None if avg is None else avg <= need))
    for view in ("corrected", "actual"):
        p99 = d.lv("ferryd", s, "p99_ms", view)
        how = "from intended send time" if view == "corrected" else "from actual send time"
        for rate, name in ((0, "back-to-back"), (10000, "paced at 10k/s like the broker test")):
            base = d.net_l("pingpong", rate, s, "p99_ms")
            need = None if base is None else P99_FACTOR * base
            rows.append((f"2-hop latency p99 at 10k msg/s, {s} B ≤ {P99_FACTOR}× TCP ping-pong p99 ({name}, this run); {how}",
                         "—" if need is None else f"≤ {need:.4f} ms (3 × {f_ms(base)})",
                         f"{p99_cell(d.l('ferryd', s, view))} ms", None if p99 is None or need is None else p99 <= need))
    rows.append(p99_every_size(d))
    for case, label, col, what in MEMORY_CASES:
        got = [r for r in d.memory if r.get("case") == case]
        fig, goal = bd.median_of(got, col), bd.median_of(got, "goal")
        if goal is not None:
            rows.append((f"memory per queued 256 B message, {label} (issue 15): {what}",
                         f"≤ {goal:,.0f} B", "—" if fig is None else f"{fig:,.1f} B",
                         None if fig is None else fig <= goal))
    return rows


def p99_every_size(d, up_to=32768):
    """Issue 15's latency target over every size up to `up_to`: ferryd's p99 (corrected,
    median of its runs) ≤ 3× the back-to-back ping-pong p99 of the same size and run."""
    ratios = []
    for s in d.sizes:
        if s > up_to:
            continue
        p99, base = d.lv("ferryd", s, "p99_ms"), d.net_l("pingpong", 0, s, "p99_ms")
        if p99 is not None and base:
            ratios.append((p99 / base, s))
    name = (f"2-hop latency p99 at 10k msg/s ≤ {P99_FACTOR}× TCP ping-pong p99 (back-to-back, this run) "
            f"at every size up to {up_to // 1024} KiB; from intended send time")
    if not ratios:
        return (name, f"≤ {P99_FACTOR}× at every size", "—", None)
    met_n = sum(1 for r, _ in ratios if r <= P99_FACTOR)
    worst, at = max(ratios)
    return (name, f"≤ {P99_FACTOR}× at every size",
            f"{met_n} of {len(ratios)} sizes; worst {f_x(worst)} at {at} B", met_n == len(ratios))


def section_targets(d):
    s = ("## Targets\n\nFrom the project's issue; computed from this run's figures. The "
         "coordinated-omission-corrected latency (measured from each message's intended send "
         "time on the 10k msg/s schedule) is the one to quote; the figure from the actual send "
         "time, which is what qpid-latency-test and the papers report, is given too.\n\n")
    s += table(["target", "threshold", "ferryd", ""], [(a, b, c, met(ok)) for a, b, c, ok in targets(d)])
    return s


def section_headline(d):
    s = HEADLINE_SIZE
    rows = []
    for b in d.brokers:
        p = d.p(b, s)
        rows.append((f"{b} (perftest / latency-test)", f_rate(p.transfers_per_sec if p else None),
                     f_rate(p.msgs_per_sec if p else None),
                     f_mb(p.msgs_per_sec * s / MB if p and p.ok else None),
                     f_ms(d.lv(b, s, "avg_ms")), f_ms(d.lv(b, s, "p99_ms")),
                     f_ms(d.lv(b, s, "avg_ms", "actual")), f_ms(d.lv(b, s, "p99_ms", "actual"))))
    for batch in (1, 64):
        m = d.net_t("relay", batch, s)
        rows.append((f"netbench relay, {batch} msg/write (no broker)", f_rate(None if m is None else 2 * m),
                     f_rate(m), f_mb(d.net_t("relay", batch, s, "mbytes_per_sec")), "", "", "", ""))
    rows.append(("netbench relay one way at 10k/s", "", "", "",
                 f_ms(d.net_l("relay-latency", 10000, s, "avg_ms")), f_ms(d.net_l("relay-latency", 10000, s, "p99_ms")), "", ""))
    for rate, name in ((10000, "paced 10k/s"), (0, "back-to-back")):
        rows.append((f"netbench TCP ping-pong round trip, {name}", "", "", "",
                     f_ms(d.net_l("pingpong", rate, s, "avg_ms")), f_ms(d.net_l("pingpong", rate, s, "p99_ms")), "", ""))
    out = f"## Headline: {s}-byte messages\n\n"
    out += ("Throughput: `ferry perftest -s`, 1 publisher, 1 subscriber, 1 queue; transfers/s counts "
            "every message twice (published, delivered), as qpid-perftest does, so messages/s is half "
            "of it. For the relay, messages/s is what it forwarded and the transfers column is twice "
            "that, for comparison. Latency: `ferry latency-test --rate 10000 --tcp-nodelay`, sender → "
            "broker → receiver (2 hops, accepted), in ms.\n\n")
    out += table(["", "transfers/s", "messages/s", "MB/s", "avg (corrected)", "p99 (corrected)",
                  "avg (actual send)", "p99 (actual send)"], rows)
    f = d.tps("ferryd", s)
    extra = []
    for o in d.others:
        extra.append(f"ferryd / {o}: throughput {f_x(bd.ratio(f, d.tps(o, s)))}, "
                     f"average latency {f_x(bd.ratio(d.lv('ferryd', s, 'avg_ms'), d.lv(o, s, 'avg_ms')))}, "
                     f"p99 {f_x(bd.ratio(d.lv('ferryd', s, 'p99_ms'), d.lv(o, s, 'p99_ms')))}")
    fm = d.p("ferryd", s)
    for batch in (1, 64):
        m = d.net_t("relay", batch, s)
        extra.append(f"ferryd messages/s ÷ relay ({batch} msg/write): "
                     f"{f_x(bd.ratio(fm.msgs_per_sec if fm else None, m))}")
    if extra:
        out += "\n" + "\n".join(f"- {e}" for e in extra) + "\n"
    return out


def section_throughput(d, charts):
    out = "## Throughput by message size\n\n"
    out += ("`ferry perftest -s --npubs 1 --nsubs 1 --qt 1 --size S --count N`, N sized from a pilot "
            "run to take a couple of seconds; median of the repetitions, with their range. "
            "Messages/s = transfers/s ÷ 2. The relay columns are `ferry netbench relay` (producer → "
            "relay → consumer over loopback, no protocol work): the ceiling for a broker here. "
            "CPU: the machine's busy share of both CPUs during the run, and the broker's and the "
            "harness's process CPU time in cores (of 2).\n\n")
    header = ["size"]
    for b in d.brokers:
        header += [f"{b} transfers/s", f"{b} range", f"{b} MB/s", f"{b} CPU: machine / broker / harness"]
    for o in d.others:
        header.append(f"ferryd ÷ {o}")
    header += ["relay msg/s (1/write)", "relay msg/s (64/write)", "ferryd ÷ relay 1", "ferryd ÷ relay 64"]
    rows = []
    for s in d.sizes:
        row = [s]
        for b in d.brokers:
            p = d.p(b, s)
            if p is None or not p.ok:
                row += ["failed" if p else "—", "", "", ""]
                continue
            lo, hi = p.spread
            row += [f_rate(p.transfers_per_sec), f"{lo / 1000:,.0f}k–{hi / 1000:,.0f}k",
                    f_mb(p.msgs_per_sec * s / MB),
                    f"{f_pct(p.machine_busy_pct)} / {'—' if p.broker_cpu_cores is None else f'{p.broker_cpu_cores:.2f}'}"
                    f" / {'—' if p.harness_cpu_cores is None else f'{p.harness_cpu_cores:.2f}'}"]
        f = d.p("ferryd", s)
        fm = f.msgs_per_sec if f else None
        for o in d.others:
            row.append(f_x(bd.ratio(d.tps("ferryd", s), d.tps(o, s))))
        r1, r64 = d.net_t("relay", 1, s), d.net_t("relay", 64, s)
        row += [f_rate(r1), f_rate(r64), f_x(bd.ratio(fm, r1)), f_x(bd.ratio(fm, r64))]
        rows.append(row)
    out += table(header, rows)
    out += "\n" + charts.get("throughput_msgs.png", "") + charts.get("throughput_mbytes.png", "")

    scale = sorted({(s, n, qt) for (b, s, n, qt) in d.perf if (n, qt) != (1, 1)})
    if scale:
        out += ("\n### Several publishers, subscribers and queues\n\n"
                "`--npubs N --nsubs N --qt Q`: N publishers and N subscribers on each of Q queues "
                "(shared mode); transfers/s over all of them.\n\n")
        header = ["size", "npubs = nsubs", "qt"] + [f"{b} transfers/s" for b in d.brokers]
        header += [f"ferryd ÷ {o}" for o in d.others] + ["ferryd vs its 1/1/1"]
        rows = []
        for s, n, qt in [(s, 1, 1) for s in sorted({c[0] for c in scale})] + scale:
            row = [s, n, qt] + [f_rate(d.tps(b, s, n, qt)) for b in d.brokers]
            row += [f_x(bd.ratio(d.tps("ferryd", s, n, qt), d.tps(o, s, n, qt))) for o in d.others]
            row.append(f_x(bd.ratio(d.tps("ferryd", s, n, qt), d.tps("ferryd", s))))
            rows.append(row)
        out += table(header, rows)
        out += "\n" + charts.get("scaling.png", "")
    return out


def runs_ms(p, col):
    """Every run's `col` of a latency point, ' / '-separated (the report's range)."""
    return " / ".join(f_ms(v) for v in p.each(col)) if p else "—"


def p99_cell(p):
    """A latency point's p99: the median of its runs, with their range when there are
    several."""
    if p is None:
        return "—"
    if len(p.runs) < 2:
        return f_ms(p["p99_ms"])
    lo, hi = p.spread("p99_ms")
    return f"{f_ms(p['p99_ms'])} ({f_ms(lo)}–{f_ms(hi)})"


def section_latency(d, charts):
    out = "## Latency by message size\n\n"
    reps = d.meta.get("lat_repeats", "1")
    out += ("`ferry latency-test --rate 10000 --tcp-nodelay --size S --time-limit T`: one sender, "
            "one receiver (prefetch 100, accepting every 50), ms. *Corrected* figures are measured "
            "from each message's intended send time on the 10k/s schedule; *actual* from the time "
            "it was really sent. Achieved rate is what the sender managed; *sender late* is how far "
            "behind its schedule the sender itself was (its thread waiting for a CPU), the part of "
            "the corrected figures the sending side added.\n\n"
            f"Each size was run {reps} time(s), a sweep over all sizes at a time; the figures are "
            "the medians of the runs, and *p99 of each run* shows them all: on this shared 2-CPU "
            "machine one run's tail can be another workload's. CPU in cores of 2 during the run: "
            "the broker's, the harness's (sender and receiver), and the whole machine's busy share; "
            "what the broker and harness leave of it unexplained was other work. *Steal*: time the "
            "host ran something else on our CPUs.\n\n")
    for b in d.brokers:
        out += f"### {b}\n\n"
        rows = []
        for s in d.sizes:
            c, a = d.l(b, s), d.l(b, s, "actual")
            if c is None:
                if (b, s, "corrected") in d.lat:
                    rows.append([s, "failed"] + [""] * 16)
                continue
            late = d.l(b, s, "sender_lateness")
            cores = c.get("harness_cpu_cores")
            rows.append([s, len(c.runs), f_rate(c.get("achieved_rate")), f_ms(c["avg_ms"]), f_ms(c["p50_ms"]),
                         f_ms(c["p90_ms"]), f_ms(c["p99_ms"]), runs_ms(c, "p99_ms"), f_ms(c["p999_ms"]),
                         f_ms(c["max_ms"]), f_ms(a["avg_ms"] if a else None), f_ms(a["p99_ms"] if a else None),
                         f_ms(a["max_ms"] if a else None),
                         f"{f_ms(late['p50_ms'])} / {f_ms(late['p99_ms'])}" if late else "—",
                         "—" if c.get("broker_cpu_cores") is None else f"{c['broker_cpu_cores']:.2f}",
                         "—" if cores is None else f"{cores:.2f}",
                         f_pct(c.get("machine_cpu_busy_pct")),
                         "—" if c.get("steal_pct") is None else f"{c['steal_pct']:.1f}%"])
        out += table(["size", "runs", "achieved msg/s", "avg", "p50", "p90", "p99", "p99 of each run",
                      "p99.9", "max", "avg (actual)", "p99 (actual)", "max (actual)",
                      "sender late p50 / p99", "broker CPU", "harness CPU", "machine busy",
                      "steal"], rows) + "\n"
    out += "### Beside the TCP baselines\n\n"
    header = ["size"] + [f"{b} avg / p99 (range)" for b in d.brokers]
    header += ["ping-pong 10k/s avg / p99", "ping-pong back-to-back avg / p99", "relay one way 10k/s avg / p99",
               "ferryd p99 ÷ ping-pong 10k/s p99", "ferryd p99 ÷ back-to-back p99"]
    header += [f"ferryd avg ÷ {o} avg" for o in d.others]
    rows = []
    for s in d.sizes:
        row = [s] + [f"{f_ms(d.lv(b, s, 'avg_ms'))} / {p99_cell(d.l(b, s))}" for b in d.brokers]
        for test, rate in (("pingpong", 10000), ("pingpong", 0), ("relay-latency", 10000)):
            row.append(f"{f_ms(d.net_l(test, rate, s, 'avg_ms'))} / {f_ms(d.net_l(test, rate, s, 'p99_ms'))}")
        fp99 = d.lv("ferryd", s, "p99_ms")
        row += [f_x(bd.ratio(fp99, d.net_l("pingpong", 10000, s, "p99_ms"))),
                f_x(bd.ratio(fp99, d.net_l("pingpong", 0, s, "p99_ms")))]
        row += [f_x(bd.ratio(d.lv("ferryd", s, "avg_ms"), d.lv(o, s, "avg_ms"))) for o in d.others]
        rows.append(row)
    out += table(header, rows)
    out += ("\nThe relay has no stamp below 16 bytes, so it has no 8-byte row; `ferry latency-test` "
            "sends at least 16 bytes (its stamp), so its 8-byte row is really 16 bytes on the wire, "
            "and `ferry perftest` at least 8.\n\n")
    out += charts.get("latency.png", "")
    return out


def section_baselines(d):
    out = "## The raw baselines (netbench, no broker)\n\n"
    out += ("`ferry netbench stream` (one hop) and `relay` (two hops through a forwarding thread), "
            "with 1 or 64 messages per write(); `pingpong` round trips, back-to-back and paced at "
            "10k/s; `relay --latency` one way at 10k/s. Run before any broker started.\n\n")
    header = ["size", "stream 1/write msg/s", "stream 64/write msg/s", "relay 1/write msg/s",
              "relay 64/write msg/s", "relay 64/write MB/s", "ping-pong b2b p50 / p99 / max",
              "ping-pong 10k/s p50 / p99 / max", "relay 10k/s p50 / p99 / max"]
    rows = []
    for s in d.sizes:
        row = [s]
        for t, b in (("stream", 1), ("stream", 64), ("relay", 1), ("relay", 64)):
            row.append(f_rate(d.net_t(t, b, s)))
        row.append(f_mb(d.net_t("relay", 64, s, "mbytes_per_sec")))
        for t, r in (("pingpong", 0), ("pingpong", 10000), ("relay-latency", 10000)):
            row.append(" / ".join(f_ms(d.net_l(t, r, s, c)) for c in ("p50_ms", "p99_ms", "max_ms")))
        rows.append(row)
    return out + table(header, rows)


def section_bounds(d):
    """What bounds each figure, said from the numbers of this run."""
    s = HEADLINE_SIZE
    lines = []
    ncpu = d.meta.get("host_nproc", "?")
    for b in d.brokers:
        p = d.p(b, s)
        if not p or not p.ok:
            continue
        busy, cores = p.machine_busy_pct, p.broker_cpu_cores
        txt = f"**{b} throughput at {s} B** ({f_rate(p.transfers_per_sec)} transfers/s): "
        if busy is not None:
            txt += (f"the machine's {ncpu} CPUs were {f_pct(busy)} busy during the run, "
                    f"the broker using {cores:.2f} cores of them" if cores is not None else
                    f"the machine's {ncpu} CPUs were {f_pct(busy)} busy during the run")
            h = p.harness_cpu_cores
            if h is not None:
                txt += f" and the harness process (publisher, subscriber, controller) {h:.2f}"
            txt += " (whole-process times over the run, connection setup included). "
            if busy >= 90:
                txt += ("Both CPUs were saturated, so the figure is bound by CPU shared between "
                        "the broker and the clients on one 2-CPU machine, not by the loopback: ")
            else:
                txt += ("The CPUs were not saturated in total: each client (publisher, subscriber) "
                        "is a single thread, so the slowest single thread on the path and the "
                        "wake-ups between threads bound the rate rather than total CPU: ")
        r64 = d.net_t("relay", 64, s)
        r1 = d.net_t("relay", 1, s)
        if r1 is not None and r64 is not None:
            txt += (f"the relay moves {f_rate(r1)} msg/s with one message per write and {f_rate(r64)} "
                    f"with 64, that is {f_x(bd.ratio(r1, p.msgs_per_sec))} and "
                    f"{f_x(bd.ratio(r64, p.msgs_per_sec))} the broker's {f_rate(p.msgs_per_sec)} msg/s.")
        lines.append(txt)
        # The largest size: bytes rather than messages.
        big = max((z for (br, z, n, q) in d.perf if br == b and n == 1 and q == 1), default=None)
        pb = d.p(b, big) if big else None
        if pb and pb.ok and big != s:
            mbps = pb.msgs_per_sec * big / MB
            relay_mb = d.net_t("relay", 64, big, "mbytes_per_sec")
            t = (f"**{b} at {big} B**: {f_mb(mbps)} MB/s of payload through the broker "
                 f"(machine {f_pct(pb.machine_busy_pct)} busy, broker "
                 f"{'—' if pb.broker_cpu_cores is None else f'{pb.broker_cpu_cores:.2f}'} cores); the relay "
                 f"copies {f_mb(relay_mb)} MB/s, so the broker reaches {f_x(bd.ratio(mbps, relay_mb))} of "
                 "the loopback's copy ceiling")
            t += (" — bound by copying bytes through the kernel and memory, not per-message work."
                  if (bd.ratio(mbps, relay_mb) or 0) >= 0.5 else
                  " — still short of the copy ceiling, so per-message and per-frame work bounds it.")
            lines.append(t)
    for b in d.brokers:
        c, a = d.l(b, s), d.l(b, s, "actual")
        if not c:
            continue
        relay = d.net_l("relay-latency", 10000, s, "avg_ms")
        pp = d.net_l("pingpong", 10000, s, "avg_ms")
        t = (f"**{b} latency at {s} B, 10k msg/s**: average {f_ms(c['avg_ms'])} ms against "
             f"{f_ms(relay)} ms for the bare relay (two loopback hops and two wake-ups, no protocol) and "
             f"{f_ms(pp)} ms for a paced TCP round trip; the median is {f_ms(c['p50_ms'])} ms, so the "
             "typical message pays the wake-ups of sender, broker and receiver plus the broker's "
             "and client's protocol work. ")
        if a and c["p99_ms"] and a["p99_ms"]:
            t += (f"p99 is {f_ms(c['p99_ms'])} ms from the intended send time and {f_ms(a['p99_ms'])} ms "
                  "from the actual one")
            if c["p99_ms"] > 1.5 * a["p99_ms"]:
                t += " — the sender itself was held up at times (it shares the 2 CPUs), which only the corrected figure charges"
            t += (f"; the tail (p99.9 {f_ms(c['p999_ms'])} ms, max {f_ms(c['max_ms'])} ms) is where the "
                  "scheduler shows: with broker, sender, receiver and the kernel on 2 CPUs a thread "
                  "that is ready can wait for a time slice.")
        if c.get("broker_cpu_cores") is not None:
            t += f" The broker used {c['broker_cpu_cores']:.2f} cores to carry 10k msg/s."
        lines.append(t)
    return "## What bounds each figure\n\n" + "\n\n".join(lines) + "\n"


def point_cell(p):
    """A perftest point as a table cell: its median transfers/s, or why there is none."""
    if p is None:
        return "—"
    if p.unavailable:
        return "not available"
    if not p.ok:
        return "failed"
    return f_rate(p.transfers_per_sec)


def turn_ratios(f, other):
    """ferryd's transfers/s over the other broker's, repetition by repetition, where both
    points have every repetition (the 0-9-1 section runs them in turn)."""
    if f is None or other is None or f.failed or other.failed:
        return []
    a, b = f.transfers, other.transfers
    if len(a) != len(b) or not all(b):
        return []
    return [x / y for x, y in zip(a, b)]


def section_amqp091(d, charts):
    if not d.amqp091:
        return ""
    brokers = []
    for (b, *_rest) in d.amqp091:
        if b not in brokers:
            brokers.append(b)
    others = [b for b in brokers if b != "ferryd"]
    out = "## AMQP 0-9-1: ferryd beside RabbitMQ\n\n"
    out += ("`ferry perftest --protocol amqp0-9-1 -s --npubs 1 --nsubs 1 --qt 1 --sub-ack 100 "
            "--prefetch 1000 [--durable yes] [--confirm 100]`: the same harness against each broker, "
            "both running, taking turns a repetition at a time (so the host's drift over the "
            "section weighs on both alike); "
            "the subscriber acknowledges every 100 messages with `multiple`. *Persistent* is a "
            "durable queue and delivery mode 2; *confirms* is publisher confirms with at most 100 "
            "unconfirmed. Transfers/s counts each message twice (published, delivered); median of "
            "the repetitions. Goal (issue 5): ferryd ahead of RabbitMQ on every row.\n\n")
    header = ["persistent", "confirms", "size"] + [f"{b} transfers/s" for b in brokers]
    header += [f"ferryd ÷ {o}" for o in others]
    rows, ahead, compared = [], 0, 0
    keys = sorted({(pe, c, s) for (_, pe, c, s) in d.amqp091}, key=lambda k: (k[0] == "yes", k[1], k[2]))
    for pe, c, s in keys:
        row = [pe, "window " + str(c) if c else "no", s]
        row += [point_cell(d.amqp091.get((b, pe, c, s))) for b in brokers]
        f = d.amqp091.get(("ferryd", pe, c, s))
        for o in others:
            q = d.amqp091.get((o, pe, c, s))
            r = bd.ratio(f.transfers_per_sec if f and f.ok else None, q.transfers_per_sec if q and q.ok else None)
            if r is not None:
                compared += 1
                ahead += r > 1
            row.append(f_x(r))
        rows.append(row)
    out += table(header, rows)
    if others and compared:
        out += (f"\nferryd is ahead on {ahead} of the {compared} rows measured on both brokers"
                f" ({'goal met' if ahead == compared else 'goal not met'} for those rows).\n")
    missing = [k for k, p in d.amqp091.items() if p.unavailable]
    if missing:
        out += ("\nRows marked *not available* were not measured: persistent messages need "
                "ferryd's durable store (`--data-dir`), which the ferryd of this run does not have.\n")
    lat_rows = []
    for (b, pe, s, view), r in sorted(d.amqp091_lat.items()):
        if view != "corrected":
            continue
        a = d.amqp091_lat.get((b, pe, s, "actual"))
        if r is None:
            lat_rows.append([b, s, "failed"] + [""] * 4)
            continue
        lat_rows.append([b, s, f_ms(r["avg_ms"]), f_ms(r["p50_ms"]), f_ms(r["p99_ms"]), f_ms(r["max_ms"]),
                         f_ms(a["p99_ms"] if a else None)])
    if lat_rows:
        out += ("\n2-hop latency over 0-9-1 at 10k msg/s (`ferry latency-test --protocol amqp0-9-1 "
                "--rate 10000 --tcp-nodelay`, prefetch 100, acknowledging every 50), ms, from the "
                "intended send time:\n\n")
        out += table(["broker", "size", "avg", "p50", "p99", "max", "p99 (actual send)"], lat_rows)
    out += "\n" + charts.get("amqp091.png", "")
    return out


AMQP1_MODES = {
    "unsettled": ("at least once", "`--confirm 1000 --sub-ack 100`: the publisher's transfers go "
                  "unsettled, at most 1000 waiting for the broker's settlement; the subscriber's "
                  "deliveries come unsettled and it accepts every 100 with one disposition"),
    "settled": ("at most once", "no `--confirm`, `--sub-ack 0`: settled transfers, settled "
                "deliveries; the publisher's final confirm is a round trip (a flow with echo)"),
}


def amqp1_ahead(d, brokers, mode):
    """(ahead, compared) over the sizes measured on ferryd and `brokers`' others."""
    ahead = compared = 0
    for (b, m, s), p in d.amqp1.items():
        if b != "ferryd" or m != mode or not p.ok:
            continue
        for o in brokers:
            q = d.amqp1.get((o, m, s))
            if o != "ferryd" and q is not None and q.ok:
                compared += 1
                ahead += p.transfers_per_sec > q.transfers_per_sec
    return ahead, compared


def section_amqp1(d, charts):
    if not d.amqp1 and not d.amqp1_lat:
        return ""
    brokers = []
    for (b, *_rest) in list(d.amqp1) + list(d.amqp1_lat):
        if b not in brokers:
            brokers.append(b)
    others = [b for b in brokers if b != "ferryd"]
    m = d.amqp1_meta
    out = "## AMQP 1.0: ferryd beside Qpid Broker-J\n\n"
    run = [f"measured {m.get('date', '—')}", f"commit {m.get('git_commit', '—')}"]
    if m.get("invocation"):
        run.append(f"`{m['invocation']}`")
    loads = [f"{k[5:].replace('_amqp1_', ' ').replace('_', ' ')} {v}" for k, v in m.items()
             if k.startswith("load_") and "_amqp1_" in k]
    out += ("`ferry perftest --protocol amqp1.0 -s --npubs 1 --nsubs 1 --qt 1 --size S` and "
            "`ferry latency-test --protocol amqp1.0 --rate 10000 --tcp-nodelay --size S`: the "
            "same harness over ferry-client1 against each broker, one after the other in one run "
            "(" + "; ".join(run) + "). AMQP 1.0 cannot declare queues, so the harness declares "
            "them over AMQP 0-10 on the same port; everything measured travels over 1.0. "
            "Transfers/s counts each message twice (published, delivered); median of the "
            "repetitions. Goal (issue 14): ferryd ahead at every size.\n\n")
    if loads:
        out += ("Machine load (1, 5, 15-minute load averages on the 2 CPUs, which other work "
                "shares): " + "; ".join(loads) + ". The CPU column is the machine's busy share "
                "during each point and the broker's own CPU time in cores.\n\n")
    modes = [mo for mo in AMQP1_MODES if any(k[1] == mo for k in d.amqp1)]
    sizes = sorted({s for (_, _, s) in d.amqp1})
    for mode in modes:
        name, how = AMQP1_MODES[mode]
        out += f"### Throughput, {name} ({mode})\n\n{how}.\n\n"
        header = ["size"]
        for b in brokers:
            header += [f"{b} transfers/s", f"{b} range", f"{b} CPU: machine / broker"]
        header += [f"ferryd ÷ {o}" for o in others]
        rows = []
        for s in sizes:
            row = [s]
            for b in brokers:
                p = d.amqp1.get((b, mode, s))
                if p is None or not p.ok:
                    row += [point_cell(p), "", ""]
                    continue
                lo, hi = p.spread
                row += [f_rate(p.transfers_per_sec), f"{lo / 1000:,.0f}k–{hi / 1000:,.0f}k",
                        f"{f_pct(p.machine_busy_pct)} / "
                        f"{'—' if p.broker_cpu_cores is None else f'{p.broker_cpu_cores:.2f}'}"]
            f = d.amqp1.get(("ferryd", mode, s))
            for o in others:
                q = d.amqp1.get((o, mode, s))
                row.append(f_x(bd.ratio(f.transfers_per_sec if f and f.ok else None,
                                        q.transfers_per_sec if q and q.ok else None)))
            rows.append(row)
        out += table(header, rows)
        if mode == "settled" and "brokerj" in brokers:
            out += ("\nBroker-J gives a 1.0 sender 20,000 credits and, once they are used, tops up "
                    "a sender of settled transfers about one message at a time (seen with "
                    "ferry-client1: 200,000 settled transfers took 180,000 `sendto` calls, one per "
                    "flow, and ended with no credit, while an unsettled sender kept about 17,500), "
                    "so its at-most-once publishing runs at the pace of those flows.\n")
        ahead, compared = amqp1_ahead(d, brokers, mode)
        if compared:
            out += (f"\nferryd is ahead at {ahead} of the {compared} sizes measured on both "
                    f"brokers ({'goal met' if ahead == compared else 'goal not met'}).\n")
        out += "\n"
    lat_sizes = sorted({s for (_, _, s, _) in d.amqp1_lat})
    if lat_sizes:
        out += ("### Latency\n\n2-hop latency at 10k msg/s (the sender's transfers settled, "
                "the receiver's credit window 100, accepting every 50), ms from each message's "
                "intended send time (coordinated omission corrected); p99 from the actual send "
                "time beside it.\n\n")
        header = ["size"]
        for b in brokers:
            header += [f"{b} avg", f"{b} p50", f"{b} p99", f"{b} p99 (actual)"]
        header += [f"{o} avg ÷ ferryd avg" for o in others]
        rows, ahead, compared = [], 0, 0
        for s in lat_sizes:
            row = [s]
            for b in brokers:
                c = d.amqp1_lat.get((b, "prefetch100", s, "corrected"))
                a = d.amqp1_lat.get((b, "prefetch100", s, "actual"))
                if c is None:
                    row += ["failed" if (b, "prefetch100", s, "corrected") in d.amqp1_lat else "—",
                            "", "", ""]
                    continue
                row += [f_ms(c["avg_ms"]), f_ms(c["p50_ms"]), f_ms(c["p99_ms"]),
                        f_ms(a["p99_ms"] if a else None)]
            fc = d.amqp1_lat.get(("ferryd", "prefetch100", s, "corrected"))
            for o in others:
                oc = d.amqp1_lat.get((o, "prefetch100", s, "corrected"))
                r = bd.ratio(oc["avg_ms"] if oc else None, fc["avg_ms"] if fc else None)
                if r is not None:
                    compared += 1
                    ahead += r > 1
                row.append(f_x(r))
            rows.append(row)
        out += table(header, rows)
        if compared:
            out += (f"\nferryd's average latency is lower at {ahead} of the {compared} sizes "
                    f"measured on both brokers.\n")
    out += "\n" + charts.get("amqp1.png", "")
    return out


def section_persistent(d, charts):
    if not d.persistent and not d.fsync:
        return ""
    out = "## Persistent messages (durable store)\n\n"
    if d.persistent and all(p.unavailable for p in d.persistent.values()):
        out += ("Not available: the ferryd of this run has no durable store (`--data-dir`), so "
                "persistent messages could not be measured.\n\n")
    elif d.persistent:
        out += ("`ferry perftest --durable yes -s --nsubs 1 --qt 1 --npubs N --size S`: a durable "
                "queue and persistent messages over AMQP 0-10, where the broker completes a transfer "
                "only after the store has synced it; the publisher waits for every completion before "
                "it reports. The device's own rate of durable appends (`ferry netbench fsync`: append "
                "+ fdatasync, one at a time, on the same device, in the same run) is the bound one "
                "sync per message would give; messages per sync above 1 is group commit at work.\n\n")
        rows = []
        for (b, proto, s, n), p in sorted(d.persistent.items()):
            sync = d.fsync.get(s, {}).get("syncs_per_sec")
            msgs = p.msgs_per_sec if p.ok else None
            rows.append([b, proto, s, n, point_cell(p), f_rate(msgs),
                         f_mb(msgs * s / MB if msgs else None), f_rate(sync),
                         f_x(bd.ratio(msgs, sync))])
        out += table(["broker", "protocol", "size", "publishers", "transfers/s", "messages/s", "MB/s",
                      "device syncs/s (same size)", "messages per sync"], rows)
        lat_rows = []
        for (b, proto, s, view), r in sorted(d.persistent_lat.items()):
            if view != "corrected":
                continue
            if r is None:
                lat_rows.append([b, proto, s, "failed"] + [""] * 4)
                continue
            sync = d.fsync.get(s, {})
            lat_rows.append([b, proto, s, f_rate(r.get("rate")), f_ms(r["avg_ms"]), f_ms(r["p50_ms"]),
                             f_ms(r["p99_ms"]), f_ms(sync.get("p50_ms"))])
        if lat_rows:
            out += ("\n2-hop latency of persistent messages (`ferry latency-test --durable yes --rate "
                    "1000`), ms from the intended send time, beside the median of one append + "
                    "fdatasync on the device:\n\n")
            out += table(["broker", "protocol", "size", "rate", "avg", "p50", "p99", "device sync p50"],
                         lat_rows)
    # Issue 4's target against RabbitMQ's confirmed persistent rate, where both were measured.
    f = d.amqp091.get(("ferryd", "yes", 100, HEADLINE_SIZE))
    rb = d.amqp091.get(("rabbitmq", "yes", 100, HEADLINE_SIZE))
    if rb is not None and rb.ok:
        fr = f.transfers_per_sec if f is not None and f.ok else None
        need = PERSISTENT_VS_RABBITMQ * rb.transfers_per_sec
        out += (f"\nTarget (issue 4): persistent and confirmed at {HEADLINE_SIZE} B, ferryd ≥ "
                f"{PERSISTENT_VS_RABBITMQ}× RabbitMQ in the same run: RabbitMQ "
                f"{f_rate(rb.transfers_per_sec)} transfers/s, so ≥ {f_rate(need)}; ferryd "
                f"{point_cell(f)}" + (f" — {met(fr >= need)}" if fr is not None else "") + ".\n")
        need2 = PERSISTENT_VS_RABBITMQ_2 * rb.transfers_per_sec
        out += (f"\nTarget (issue 15): the same at ≥ {PERSISTENT_VS_RABBITMQ_2}× RabbitMQ, so ≥ "
                f"{f_rate(need2)}" + (f" — {met(fr >= need2)}" if fr is not None else "") + ".")
        turns = turn_ratios(f, rb) if d.meta.get("amqp091_in_turn") == "yes" else []
        if turns:
            out += (" Repetition by repetition (each ferryd run beside the RabbitMQ run that "
                    "followed it): " + ", ".join(f"{r:.2f}×" for r in turns) + ".")
        sync = d.fsync.get(HEADLINE_SIZE, {}).get("p50_ms")
        if fr is not None and sync:
            # Little's law: 100 unconfirmed messages, each confirmed after a sync.
            per_msg_ms = 100 / (fr / 2) * 1000
            out += (f" With at most 100 unconfirmed, a publisher's rate is 100 ÷ the time a "
                    f"message waits for its confirm: at {f_rate(fr / 2)} messages/s that is "
                    f"{per_msg_ms:.3f} ms, {per_msg_ms / sync:.1f}× the device's median append + "
                    f"fdatasync ({sync:.3f} ms). The window goes round as one batch (the 100 "
                    "arrive together, share one sync and are confirmed by one ack), so each "
                    "round is a sync plus a round trip through broker and harness, which share "
                    "the 2 CPUs with the subscriber.")
        out += "\n"
    if d.fsync:
        out += "\nThe device (`ferry netbench fsync`, before any broker started):\n\n"
        out += table(["append size", "syncs/s", "p50", "p99", "max"],
                     [[s, f_rate(r.get("syncs_per_sec")), f_ms(r.get("p50_ms")), f_ms(r.get("p99_ms")),
                       f_ms(r.get("max_ms"))] for s, r in sorted(d.fsync.items())])
    out += "\n" + charts.get("persistent.png", "")
    return out


def section_cluster(d):
    if not d.cluster:
        return ""
    out = "## Replicated queues (cluster)\n\n"
    m = d.cluster_meta
    run = [f"measured {m.get('date', '—')}", f"commit {m.get('git_commit', '—')}"]
    if m.get("invocation"):
        run.append(f"`{m['invocation']}`")
    if m.get("load_at_end"):
        run.append(f"load at the end {m['load_at_end']}")
    out += ("`ferry perftest --protocol amqp0-9-1 --queue-type quorum --confirm 100 --durable yes -s "
            "--size 256 --nsubs 1 --qt 1 --npubs N`: a replicated queue on a 3-node ferryd cluster "
            "(one Raft group, every node with its own data directory on the same device; the harness "
            "talks to the leader) beside a quorum queue on a RabbitMQ cluster on the same machine "
            "in the same run (nodes joined with `rabbitmqctl join_cluster`, the harness on the "
            "queue's leader). A publish is confirmed only once a majority has it on disk. All "
            "nodes share the machine's CPUs with each other and the harness (" + "; ".join(run)
            + ").\n\n")
    rows = []
    for (b, nodes, s, n), p in sorted(d.cluster.items()):
        msgs = p.msgs_per_sec if p.ok else None
        spread = p.spread
        rows.append([b, nodes, s, n, point_cell(p), f_rate(msgs),
                     f"{f_rate(spread[0])} – {f_rate(spread[1])}" if spread else "—",
                     f_pct(statistics.median([c for c in p.cpu_busy if c is not None]))
                     if p.ok and any(c is not None for c in p.cpu_busy) else "—"])
    out += table(["broker", "nodes", "size", "publishers", "transfers/s (median)", "messages/s",
                  "spread of the repetitions", "machine CPU busy"], rows)
    for n in sorted({k[3] for k in d.cluster}):
        f = next((p for k, p in d.cluster.items() if k[0] == "ferryd-cluster" and k[3] == n), None)
        r = next((p for k, p in d.cluster.items() if k[0] == "rabbitmq-quorum" and k[3] == n), None)
        if f is None or r is None or not r.ok:
            continue
        fr = f.transfers_per_sec if f.ok else None
        need = CLUSTER_VS_RABBITMQ * r.transfers_per_sec
        out += (f"\nTarget (issue 13), {n} publisher(s): ferryd ≥ {CLUSTER_VS_RABBITMQ}× RabbitMQ quorum "
                f"queues: RabbitMQ {f_rate(r.transfers_per_sec)} transfers/s, so ≥ {f_rate(need)}; "
                f"ferryd {point_cell(f)}" + (f" ({f_x(bd.ratio(fr, r.transfers_per_sec))})"
                                             f" — {met(fr >= need)}" if fr is not None else "") + ".\n")
    return out


RELAY_BOUND_METRICS = [("cpu_us", "CPU time (µs)"), ("syscalls", "system calls"),
                       ("context_switches", "context switches"), ("instructions", "instructions")]


def section_relay_bound(d):
    """Per-message costs of broker and harness at 256 B, 1/1/1 (the `bounds` section), and
    what they mean for the issue's goal of half the relay's rate."""
    if not d.relay_bound and not d.relay_bound_status:
        return ""
    v = d.relay_bound
    med = {k: statistics.median(x) for k, x in v.items() if x}
    m = d.relay_bound_meta
    out = "## What bounds the 1/1/1 rate: costs per message\n\n"
    out += ("`ferry perftest -s --size 256` (1 publisher, 1 subscriber, 1 queue) against ferryd, "
            "with `perf stat` counting software events and the raw system-call tracepoint for "
            "ferryd (attached) and for the harness process (publisher, subscriber and controller "
            "threads together); instructions under callgrind, the difference of a long and a short "
            "run so start-up drops out. Per message published and delivered "
            "(one transfer in, one out); median of the repetitions"
            + (f" (measured {m.get('date', '—')}, commit {m.get('git_commit', '—')})" if m else "")
            + ".\n\n")
    rows = []
    for who in ("ferryd", "harness"):
        cells = [who]
        for metric, _ in RELAY_BOUND_METRICS:
            x = med.get((who, metric))
            if x is None:
                st = d.relay_bound_status.get((who, metric))
                cells.append(st if st and st != "ok" else "—")
            elif metric == "instructions":
                cells.append(f"{x:,.0f}")
            else:
                cells.append(f"{x:.3f}")
        rows.append(cells)
    both = [med.get(("ferryd", "cpu_us")), med.get(("harness", "cpu_us"))]
    total = sum(both) if all(x is not None for x in both) else None
    out += table(["process"] + [t for _, t in RELAY_BOUND_METRICS], rows)
    tps = med.get(("run", "transfers_per_sec"))
    relay1 = d.net_t("relay", 1, 256)
    ncpu = num_or_none(d.meta.get("host_nproc"))
    if total and ncpu:
        ceiling = ncpu / total * 1e6
        out += (f"\nBroker and harness together spend {total:.2f} µs of CPU per message; "
                f"{ncpu:.0f} CPUs can therefore carry at most {f_rate(ceiling)} messages/s through "
                "this broker and this harness, however the work is spread")
        if tps:
            out += (f" (the runs under `perf stat` reached {f_rate(tps / 2)} messages/s, "
                    f"{f_x(bd.ratio(tps / 2, ceiling))} of that ceiling)")
        out += ". "
        if relay1:
            goal = relay1 / 2
            budget = ncpu / goal * 1e6
            out += (f"Half the relay's 1-message-per-write rate is {f_rate(goal)} messages/s, which "
                    f"needs at most {budget:.2f} µs of CPU per message for broker and harness "
                    "together")
            if total > budget:
                out += f", {f_x(bd.ratio(total, budget))} less than now. "
            else:
                out += (": the costs now fit within it, so what remains between the rate reached "
                        "and that ceiling is the path's wake-ups and the single-threaded clients, "
                        "not work per message. ")
            out += ("The relay does no protocol work at all: it forwards bytes, one read and one "
                    "write per message. ")
        out += ("System calls are not what costs: reads and writes are batched (many messages "
                "per call) on both sides, so the CPU goes to protocol and queue work per message "
                "(instructions above) and to the wake-ups between the threads on the path.\n")
    return out


def num_or_none(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def section_scale(d):
    if not d.scale and not d.scale_load:
        return ""
    out = "## Many idle connections and queues\n\n"
    m = d.scale_meta
    rows = d.scale_load
    med = lambda col: bd.median_of(rows, col)  # noqa: E731
    conns, queues = med("connections"), med("queues")
    run = [f"measured {m.get('date', '—')}", f"commit {m.get('git_commit', '—')}"]
    if m.get("scale_load_at_end"):
        run.append(f"load at the end {m['scale_load_at_end']}")
    k, w, one = med("declare_connections"), med("window"), med("one_by_one")
    out += ("`ferry scale` holds idle AMQP 0-10 connections open against ferryd (each logged in "
            "with PLAIN and with one attached session) and declares queues, each bound to "
            "`amq.direct` by its name, pipelined on "
            f"{f_rate(k)} of the connections with {f_rate(w)} declares in flight on each; then "
            f"{f_rate(one)} more one at a time, each reply awaited. ferryd's resident memory "
            "(VmRSS) is read before, with the connections, and with the queues too, so the cost "
            "of one is the growth divided by their number. While all of it exists, one "
            "`ferry perftest -s --size 256` (1 publisher, 1 subscriber, 1 queue) runs through "
            "a busy queue; the same perftest runs without the load just before and just after it "
            "(a fresh broker keeps getting faster over its first runs, so runs alone on both "
            "sides cancel that trend), each such set in a fresh ferryd after an unrecorded "
            "warm-up run (memory an earlier load freed would otherwise be reused and hide the "
            "cost), and the throughput columns are the medians of those runs. Afterwards every session is "
            "asked to answer (`execution.sync`), the queues are deleted and the connections "
            "closed (" + "; ".join(run) + ").\n\n")
    if rows:
        answered = med("answered")
        out += table(
            ["connections", "queues", "open (all connections)", "connections/s",
             "declares/s (pipelined)", "declare one by one", "RSS per connection",
             "RSS per queue", "RSS before → with both → after removing them", "sessions answering"],
            [[f_rate(conns), f_rate(queues), f_secs(med("open_secs")), f_rate(med("opens_per_sec")),
              f_rate(med("declares_per_sec")),
              "—" if med("one_by_one_ms") is None else f"{f_ms(med('one_by_one_ms'))} ms",
              f_kib(med("rss_per_connection_kib")), f_kib(med("rss_per_queue_kib")),
              f"{f_kib(med('rss_start_kib'))} → {f_kib(med('rss_queues_kib'))} → "
              f"{f_kib(med('rss_end_kib'))}",
              "—" if answered is None else f"{answered:,.0f} of {f_rate(conns)}"]])
        out += (f"\nMedians of {len(rows)} run(s). Deleting the queues took "
                f"{f_secs(med('delete_secs'))} ({f_rate(med('deletes_per_sec'))}/s), closing the "
                f"connections {f_secs(med('close_secs'))}. RSS after removing them includes what "
                "the busy queue's run left in the allocator.\n\n")
    none, idle = d.scale.get("none"), d.scale.get("idle")
    prow = []
    for label, p in (("alone", none), ("beside the idle connections and queues", idle)):
        if p is None:
            continue
        spread = p.spread
        prow.append([label, point_cell(p), f_rate(p.msgs_per_sec if p.ok else None),
                     f"{f_rate(spread[0])} – {f_rate(spread[1])}" if spread else "—",
                     len(p.transfers)])
    if prow:
        out += table(["busy queue (256 B, 1 pub / 1 sub)", "transfers/s (median)", "messages/s",
                      "spread of the runs", "runs"], prow)
    if none is not None and idle is not None and none.ok and idle.ok:
        r = bd.ratio(idle.transfers_per_sec, none.transfers_per_sec)
        out += (f"\nWith the load / without: **{f_x(r)}** (transfers/s, medians of the runs; "
                "alone just before and just after each run with the load, each set in a fresh "
                "ferryd).\n")
    cpu_none, cpu_idle = d.scale_cpu.get("none"), d.scale_cpu.get("idle")
    if cpu_none and cpu_idle:
        a, b = statistics.median(cpu_none), statistics.median(cpu_idle)
        out += (f"\nferryd's CPU time per message while the busy queue ran (`perf stat` attached, "
                f"task-clock ÷ messages): alone {a:.3f} µs (runs {min(cpu_none):.3f}–"
                f"{max(cpu_none):.3f}), beside the load {b:.3f} µs (runs {min(cpu_idle):.3f}–"
                f"{max(cpu_idle):.3f}): **{f_x(bd.ratio(b, a))}** the work per message. "
                "Throughput on this shared 2-CPU machine spreads by ±20% between runs of the "
                "same thing; the CPU per message is the steadier measure of whether the idle "
                "connections and queues cost the busy queue anything.\n")
    return out


MEMORY_CASES = [
    ("in_memory", "transient, in memory", "beyond_content",
     "RSS per message beyond its body and the 0-10 header it arrived with"),
    ("on_disk", "persistent, content kept on disk", "rss_per_message",
     "RSS per message (its content is in the journal only)"),
]


def section_memory(d):
    """Broker memory per queued message (the `memory` section: crates/ferryd/tests/memory.rs
    run by bench/memory.sh)."""
    if not d.memory:
        return ""
    m = d.memory_meta
    out = "## Memory per queued message\n\n"
    out += ("`crates/ferryd/tests/memory.rs` (release build): a ferryd of its own per case, one "
            "AMQP 0-10 publisher fills a queue with no consumer with 256-byte messages, after "
            "a warm-up that is published and purged; ferryd's resident set (VmRSS) is read "
            "before and after, and the growth is divided by the number of messages. The "
            "persistent case runs with `--store-memory-budget 256KiB`, so all but the queue's "
            "read-ahead window is kept on disk and what remains is bookkeeping: the queue's "
            "entry, the stand-in for the message and the store's index entry"
            + (f" (measured {m.get('date', '—')}, commit {m.get('git_commit', '—')})" if m else "")
            + ".\n\n")
    rows = []
    for case, label, col, what in MEMORY_CASES:
        got = [r for r in d.memory if r.get("case") == case]
        if not got:
            continue
        fig = bd.median_of(got, col)
        per = bd.median_of(got, "rss_per_message")
        goal = bd.median_of(got, "goal")
        n = bd.median_of(got, "messages")
        ok = None if fig is None or goal is None else fig <= goal
        rows.append([label, f_rate(n), "—" if per is None else f"{per:,.1f} B",
                     what, "—" if fig is None else f"**{fig:,.1f} B**",
                     "—" if goal is None else f"≤ {goal:,.0f} B", met(ok)])
    out += table(["messages", "queued", "RSS per message", "judged by", "figure",
                  "goal (issue 15)", ""], rows)
    return out


def section_tail_analysis():
    """The written analysis of what bounds the latency tail (bench/LATENCY-TAIL.md), which
    is prose from an investigation rather than figures of this run."""
    if not TAIL_ANALYSIS.exists():
        return ""
    text = TAIL_ANALYSIS.read_text()
    # One level down: its title becomes a section of this report, its sections subsections.
    text = re.sub(r"^(#+) ", r"#\1 ", text, flags=re.M)
    return text.rstrip() + "\n"


def section_notes(d):
    notes = [
        "The machine is a shared 2-CPU virtual machine: broker, clients and (for the baselines) "
        "both ends of every TCP connection run on the same two CPUs, and other work on the host "
        "adds noise. Throughput points are the median of their repetitions with the range shown; "
        "compare sizes and brokers by their order of magnitude, not the last digit.",
        "The p99 target is judged against the back-to-back TCP ping-pong (the raw figure: each "
        "end is woken again within microseconds, so the CPUs never go idle). The ping-pong paced "
        "at 10k/s is shown beside it; it runs open loop like the broker test (messages go out on "
        "the schedule from one thread, echoes are read on another), so a stall delays only the "
        "messages in flight, and, like the broker figures, it is charged from each message's "
        "intended send time, which includes any lateness of the sending thread itself.",
        "Netbench stream and relay runs are bounded by time (BENCH_NET_SECS), not by a message "
        "count, so small messages batched 64 to a write are measured over as long as large ones.",
    ]
    if d.others:
        notes.append(
            "Broker-J's figures are taken after a pilot run that warms its JIT. Two Broker-J "
            "behaviours shape the harness: (1) while a consumer has credit and its socket drains, "
            "Broker-J's I/O thread keeps sending and reads nothing, so it never sees the client's "
            "`session.completed` and fails the session once 65,536 transfers are uncompleted "
            "(`Command buffer full`); `ferry perftest` therefore grants each subscriber its quota "
            "a 20,000-message window at a time. (2) With more than one subscriber on a queue, "
            "Broker-J sometimes leaves the last messages on the queue while a subscriber still has "
            "credit for them and every socket is idle (seen with `--npubs 1 --nsubs 2 --qt 1`: the "
            "message was still on the queue afterwards); the subscriber then times out with a "
            "message saying so. Such runs are cut off after the per-run "
            "timeout and listed below as failed.")
    failed = [(k, p) for k, p in d.perf.items() if p.failed]
    if failed:
        notes.append("Failed perftest runs (left out of the medians): " + ", ".join(
            f"{b} {s} B {n}x{n} qt {q} ({p.failed})" for (b, s, n, q), p in sorted(failed)))
    lfail = bd.latency_failures(d.out)
    if lfail:
        notes.append("Failed latency-test runs (each retried once; a size with no figures failed "
                     "twice): " + ", ".join(f"{b} {s} B" for b, s in lfail) + ". Each failure's "
                     "message is kept in the run's raw/latency-*.failed-* files.")
    return "## Notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def charts_md(d, md_dir):
    out = {}
    titles = {"throughput_msgs.png": "Throughput, messages/s", "throughput_mbytes.png": "Throughput, MB/s",
              "latency.png": "Latency by size", "scaling.png": "Several publishers and queues",
              "amqp091.png": "AMQP 0-9-1: ferryd and RabbitMQ", "persistent.png": "Persistent messages",
              "amqp1.png": "AMQP 1.0: ferryd and Broker-J"}
    for name, title in titles.items():
        path = d.out / name
        if path.exists():
            out[name] = f"![{title}]({rel(path, md_dir)})\n\n"
    return out


def render(out_dir, md_path):
    d = Data(out_dir)
    md_dir = Path(md_path).resolve().parent
    charts = charts_md(d, md_dir)
    parts = [p for p in [
        "# Ferry benchmarks\n\n"
        "Written by `bench/report.py` from the CSVs of one run of `bench/run.sh` "
        f"([{rel(d.out, md_dir)}/]({rel(d.out, md_dir)}/)); do not edit by hand — rerun the script. "
        "The matrix is the Red Hat MRG Messaging papers': qpid-perftest throughput and "
        "qpid-latency-test 2-hop latency at 10k msg/s over message sizes 8 B – 32 KiB, with "
        "`ferry perftest` and `ferry latency-test` (the same options and reports), beside what "
        "loopback TCP alone does on the same machine.\n",
        section_run(d, md_dir),
        section_targets(d),
        section_headline(d),
        section_bounds(d),
        section_throughput(d, charts),
        section_latency(d, charts),
        section_baselines(d),
        section_amqp091(d, charts),
        section_persistent(d, charts),
        section_amqp1(d, charts),
        section_cluster(d),
        section_relay_bound(d),
        section_scale(d),
        section_memory(d),
        section_tail_analysis(),
        section_notes(d),
    ] if p]
    return "\n".join(parts)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = render(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
    Path(sys.argv[2]).write_text(text)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
