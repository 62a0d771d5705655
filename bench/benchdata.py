"""Reading the CSVs bench/run.sh writes, and the figures derived from them.

Shared by plot.py and report.py (standard library only), so the charts and the report
always agree on which number stands for a point (the median of its repetitions).
"""
import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path

PAPERS_SIZES = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def read_rows(path):
    path = Path(path)
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def cell(v):
    """A CSV cell as float where it is a number, None where empty, else the text."""
    n = num(v)
    return n if n is not None or v in ("", None) else v


def num(v):
    """A CSV cell as float, or None when empty or not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@dataclass
class PerfPoint:
    """The repetitions of one perftest configuration against one broker."""

    broker: str
    size: int
    npubs: int
    qt: int
    count: int = 0
    transfers: list = field(default_factory=list)  # transfers/s of each successful rep
    mbytes: list = field(default_factory=list)
    cpu_busy: list = field(default_factory=list)
    broker_cores: list = field(default_factory=list)
    harness_cores: list = field(default_factory=list)
    failed: int = 0
    # The script could not measure it here (e.g. persistent rows without a durable store).
    unavailable: bool = False

    @property
    def ok(self):
        return bool(self.transfers)

    @property
    def transfers_per_sec(self):
        return statistics.median(self.transfers) if self.transfers else None

    @property
    def msgs_per_sec(self):
        """Messages through the broker per second: each message is one publish plus one
        delivery per subscriber that gets it (shared mode: exactly one)."""
        t = self.transfers_per_sec
        return None if t is None else t / 2

    @property
    def mbytes_per_sec(self):
        return statistics.median(self.mbytes) if self.mbytes else None

    @property
    def spread(self):
        """(min, max) of transfers/s over the repetitions."""
        return (min(self.transfers), max(self.transfers)) if self.transfers else None

    @property
    def machine_busy_pct(self):
        v = [x for x in self.cpu_busy if x is not None]
        return statistics.median(v) if v else None

    @property
    def harness_cpu_cores(self):
        v = [x for x in self.harness_cores if x is not None]
        return statistics.median(v) if v else None

    @property
    def broker_cpu_cores(self):
        v = [x for x in self.broker_cores if x is not None]
        return statistics.median(v) if v else None


def perftest_points(out):
    """{(broker, size, npubs, qt): PerfPoint}; pilot runs are left out."""
    return grouped_points(Path(out) / "perftest.csv", ("broker", "size", "npubs", "qt"))


def grouped_points(path, key_cols):
    """{key: PerfPoint} from a perftest-style CSV, the key being the values of key_cols
    (numbers where they parse as integers); pilot runs are left out, failed runs counted,
    rows with status 'unavailable' mark the point as not measurable here."""
    points = {}
    for r in read_rows(path):
        if r.get("rep") == "pilot" and r.get("status") == "ok":
            continue
        key = tuple(int(r[c]) if r[c].isdigit() else r[c] for c in key_cols)
        p = points.setdefault(key, PerfPoint(r["broker"], int(r["size"]), int(r["npubs"]), int(r["qt"])))
        if r.get("count", "").isdigit():
            p.count = int(r["count"])
        if r.get("status") == "unavailable":
            p.unavailable = True
            continue
        if r.get("status") != "ok" or num(r.get("transfers_per_sec")) is None:
            p.failed += 1
            continue
        p.transfers.append(num(r["transfers_per_sec"]))
        p.mbytes.append(num(r["mbytes_per_sec"]))
        p.cpu_busy.append(num(r.get("machine_cpu_busy_pct")))
        p.broker_cores.append(num(r.get("broker_cpu_cores")))
        p.harness_cores.append(num(r.get("harness_cpu_cores")))
    return points


def brokers(out):
    """Broker labels of the papers' matrix (0-10), in the order they were measured (ferryd
    first)."""
    seen = []
    for name in ("perftest.csv", "latency_test.csv"):
        for r in read_rows(Path(out) / name):
            if r["broker"] not in seen:
                seen.append(r["broker"])
    return seen


def latency_points(out):
    """{(broker, size, view): LatPoint or None}; view is 'corrected' (from the intended send
    time, coordinated-omission safe), 'actual' (from the actual send time, what
    qpid-latency-test reports) or 'sender_lateness'. A size without a successful run maps
    to None."""
    return grouped_latency(Path(out) / "latency_test.csv", ("broker", "size", "view"))


class LatPoint(dict):
    """One latency point: its figures (a dict, by CSV column) are the medians over the
    successful runs, which stay available in `runs` (rows in the order they were made)."""

    def __init__(self, runs):
        super().__init__()
        self.runs = runs
        for k in runs[0]:
            values = [r[k] for r in runs if isinstance(r.get(k), float)]
            self[k] = statistics.median(values) if values else runs[0][k]

    def each(self, col):
        """`col` of every run, in order (None where a run has no figure)."""
        return [r.get(col) for r in self.runs]

    def spread(self, col):
        """(min, max) of `col` over the runs, or None."""
        v = [x for x in self.each(col) if x is not None]
        return (min(v), max(v)) if v else None


def grouped_latency(path, key_cols):
    """{key: LatPoint or None} from a latency CSV, the key being the values of key_cols
    (numbers where they parse as integers). Every successful row is one run of its point
    (files written before repetitions have one per point); failed rows only count in
    `latency_failures`."""
    runs, keys = {}, []
    for r in read_rows(path):
        key = tuple(int(r[c]) if r[c].isdigit() else r[c] for c in key_cols)
        if key not in runs:
            runs[key] = []
            keys.append(key)
        if r.get("status") == "ok":
            runs[key].append({k: cell(v) for k, v in r.items()})
    return {k: (LatPoint(runs[k]) if runs[k] else None) for k in keys}


def amqp091_points(out):
    """{(broker, persistent 'yes'|'no', confirm window, size): PerfPoint} of the 0-9-1
    side-by-side matrix."""
    return grouped_points(Path(out) / "amqp091.csv", ("broker", "persistent", "confirm", "size"))


def amqp1_points(out):
    """{(broker, mode 'unsettled'|'settled', size): PerfPoint} of the AMQP 1.0
    side-by-side."""
    return grouped_points(Path(out) / "amqp1.csv", ("broker", "mode", "size"))


def amqp1_latency(out):
    """{(broker, mode, size, view): row or None} of the AMQP 1.0 latency runs."""
    return variant_latency(out, "amqp1_latency.csv", "mode")


def persistent_points(out):
    """{(broker, protocol, size, npubs): PerfPoint} of the durable-store benchmark."""
    return grouped_points(Path(out) / "persistent.csv", ("broker", "protocol", "size", "npubs"))


def cluster_points(out):
    """{(broker, nodes, size, npubs): PerfPoint} of the replicated-queue benchmark."""
    return grouped_points(Path(out) / "cluster.csv", ("broker", "nodes", "size", "npubs"))


def relay_bound(out):
    """{(who, metric): [per-message values of the repetitions]} and {(who, metric): status}
    of the `bounds` section (bench/bounds.sh): who is ferryd, harness or run; metric is
    cpu_us, syscalls, context_switches, instructions or transfers_per_sec."""
    values, status = {}, {}
    for r in read_rows(Path(out) / "bounds.csv"):
        key = (r["who"], r["metric"])
        status[key] = r.get("status")
        if r.get("status") == "ok" and r.get("per_msg"):
            values.setdefault(key, []).append(num(r["per_msg"]))
    return values, status
def scale_points(out):
    """{load: PerfPoint} of the scale section's busy queue: load "none" alone, "idle" while
    the idle connections and queues of `ferry scale` exist (scale.csv)."""
    return {k[1]: p for k, p in grouped_points(Path(out) / "scale.csv", ("broker", "load")).items()}


def scale_loads(out):
    """The `ferry scale` rows (scale_load.csv), one per repetition, as numbers where they
    parse."""
    return [{k: (v if k == "broker" else num(v)) for k, v in r.items()}
            for r in read_rows(Path(out) / "scale_load.csv")]


def scale_cpu(out):
    """{load: [ferryd CPU µs per message, one per run that counted]} of the scale section
    (scale_cpu.csv)."""
    got = {}
    for r in read_rows(Path(out) / "scale_cpu.csv"):
        v = num(r.get("cpu_us_per_msg"))
        if r.get("status") == "ok" and v is not None:
            got.setdefault(r["load"], []).append(v)
    return got


def memory_rows(out):
    """The memory section's rows (memory.csv), one per case and run, as numbers where they
    parse."""
    return [{k: (v if k == "case" else num(v)) for k, v in r.items()}
            for r in read_rows(Path(out) / "memory.csv")]


def median_of(rows, col):
    """The median of column `col` over `rows`, leaving out empty cells; None if none."""
    v = [r.get(col) for r in rows if r.get(col) is not None]
    return statistics.median(v) if v else None


def variant_latency(out, name, variant_col):
    """{(broker, variant, size, view): LatPoint or None} from a latency CSV with one extra
    identifying column after the broker (amqp091_latency.csv, persistent_latency.csv)."""
    return grouped_latency(Path(out) / name, ("broker", variant_col, "size", "view"))


def fsync_rates(out):
    """{size: row} of `ferry netbench fsync`: syncs/s and latency of append + fdatasync."""
    return {int(r["size"]): {k: num(v) for k, v in r.items() if k != "test"}
            for r in read_rows(Path(out) / "fsync.csv")}


def latency_failures(out):
    """[(broker, size)] of every failed latency-test run, retried or not."""
    return [(r["broker"], int(r["size"])) for r in read_rows(Path(out) / "latency_test.csv")
            if r.get("status") != "ok"]


def netbench_latency(out):
    """{(test, rate, size): row}; test is 'pingpong' (round trip) or 'relay-latency' (one
    way through a relay); rate 0 is back-to-back."""
    points = {}
    for r in read_rows(Path(out) / "latency.csv"):
        points[(r["test"], int(r["rate"]), int(r["size"]))] = {
            k: num(v) for k, v in r.items() if k not in ("test", "nodelay")
        }
    return points


def netbench_throughput(out):
    """{(test, batch, size): row}; test is 'stream' (one hop) or 'relay' (two hops)."""
    points = {}
    for r in read_rows(Path(out) / "throughput.csv"):
        points[(r["test"], int(r["batch"]), int(r["size"]))] = {
            k: num(v) for k, v in r.items() if k != "test"
        }
    return points


def meta(out, name="meta.csv"):
    return {r["key"]: r["value"] for r in read_rows(Path(out) / name)}


def section_meta(out, section):
    """The meta of the run that measured `section`: meta_<section>.csv when that section
    was published on its own beside the others' committed results, else meta.csv."""
    own = meta(out, f"meta_{section}.csv")
    return own if own else meta(out)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b
