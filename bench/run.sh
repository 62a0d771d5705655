#!/usr/bin/env bash
# Ferry benchmarks: the MRG papers' matrix against ferryd, beside the loopback baselines and
# (optionally) a second AMQP 0-10 broker; the AMQP 0-9-1 side-by-side with RabbitMQ; the
# persistent (durable store) figures with the device's fsync rate.
#
#   bench/run.sh [--brokerj] [--rabbitmq] [--quick] [--sections LIST] [--no-publish]
#                [OTHER_HOST:PORT]
#
#   --brokerj         also start Apache Qpid Broker-J (interop/brokerj/start.sh) on a free
#                     loopback port, measure it with the same harnesses, and stop it
#   --rabbitmq        also start Debian's rabbitmq-server (installed with apt-get if missing)
#                     on free loopback ports, in a scratch directory, for the 0-9-1 section
#   OTHER_HOST:PORT   also measure an AMQP 0-10 broker that is already running there
#                     (label it with BENCH_OTHER_LABEL, default "other"; credentials with
#                     BENCH_OTHER_USER / BENCH_OTHER_PASSWORD, default guest/guest)
#   --quick           smoke run (same as BENCH_QUICK=1): few sizes, short points, one
#                     repetition; never publishes
#   --sections LIST   comma-separated subset of: baselines, papers, amqp091, persistent,
#                     amqp1, cluster, bounds, scale, memory (default: all of them). A run
#                     of all sections publishes all of bench/results/; a run of `amqp1`,
#                     `cluster`, `bounds`, `scale` or `memory` alone publishes only its own
#                     files (amqp1*.csv, amqp1.png, meta_amqp1.csv, commands_amqp1.txt;
#                     likewise cluster*, bounds*, scale*, memory*) beside the
#                     committed results of the others and rewrites BENCHMARKS.md from the
#                     merge; any other subset publishes nothing
#   --no-publish      leave bench/results/ and BENCHMARKS.md alone
#
# What it does: builds the release `ferry` and `ferryd`, then
#   baselines   netbench pingpong, stream, relay over the papers' sizes, and the fsync rate
#               of the device under bench/out (no broker running);
#   papers      starts ferryd, runs `ferry perftest -s` for every size (1 pub/1 sub/1 queue,
#               repeated) and a few npubs=nsubs x qt points, and `ferry latency-test --rate
#               10000 --tcp-nodelay` for every size (repeated, a sweep at a time); the same
#               for the other 0-10 brokers;
#   amqp091     ferryd and RabbitMQ over AMQP 0-9-1 with the same harness, both running and
#               taking turns a repetition at a time: transient and persistent, with and
#               without publisher confirms (window 100), 16 and 256 B, plus 2-hop latency at
#               10k msg/s; persistent rows need ferryd's durable store
#               (--data-dir) and are marked "unavailable" when this ferryd has none;
#   persistent  ferryd's durable store: perftest --durable yes at 256 B and 4 KiB with 1 and
#               8 publishers (over 0-10, completion after the store's sync), and persistent
#               latency; "unavailable" without --data-dir.
#   cluster     replicated queues: 3 local ferryd nodes and (with --rabbitmq) 3 RabbitMQ nodes
#               with quorum queues, 256 B with confirms, 1 and 8 publishers (bench/cluster.sh).
#   amqp1       AMQP 1.0 against ferryd and (with --brokerj) Broker-J in the same run: the
#               papers' sizes, 1 pub / 1 sub / 1 queue perftest in two settlement modes
#               (unsettled: --confirm 1000 --sub-ack 100; settled: both ways at most once)
#               and latency-test at 10k msg/s; queues are declared over 0-10 on the same
#               port (1.0 cannot declare them).
#   bounds      what bounds the 256 B 1/1/1 rate: CPU time, system calls and context
#               switches per message of ferryd and of the harness (perf stat), and their
#               instructions per message (callgrind), where perf and valgrind are installed
#               (bench/bounds.sh).
#   scale       10,000 idle 0-10 connections and 10,000 queues held by `ferry scale` on a
#               ferryd of their own: open time, declare rate, ferryd's RSS per connection and
#               per queue, and 256 B perftest throughput of one busy queue with and without
#               them, alternating (bench/scale.sh).
#   memory      ferryd's RSS per queued 256 B message with 1,000,000 queued, in memory and
#               kept on disk (crates/ferryd/tests/memory.rs in a release build; bench/memory.sh).
# Every figure lands as CSV under bench/out/ (or $BENCH_OUT); bench/plot.py draws the charts
# and bench/report.py writes the report. A full run then copies the CSVs and charts to
# bench/results/ and writes BENCHMARKS.md at the repository root.
#
# Every client run is bounded: a message count (sized from a short pilot run so that a point
# takes about $BENCH_PERF_SECS seconds), --time-limit where the harness has one, and
# `timeout` around every command. Servers listen on 127.0.0.1 only and are stopped on exit.
#
# Environment:
#   BENCH_QUICK=1         smoke run: sizes 8 256 32768, short points, one repetition
#   BENCH_OUT             working directory for CSVs, logs, charts (default bench/out)
#   BENCH_PERF_SECS       target seconds per perftest point (default 2; quick 0.5)
#   BENCH_PERF_REPEATS    perftest repetitions per point; the report takes the median (default 3)
#   BENCH_LAT_SECS        latency-test --time-limit per size (default 8; quick 2)
#   BENCH_LAT_REPEATS     runs of each papers latency point, a sweep over the sizes at a time;
#                         the report takes the median and shows every run (default 3; quick 1)
#   BENCH_NET_SECS        seconds per netbench stream/relay run (default 2; quick 1)
#   BENCH_OTHER_MAX_COUNT messages per publisher at most for other brokers (default 0: no cap)
#   BENCH_SCALE_CONNECTIONS, BENCH_SCALE_QUEUES  the scale section's load (default 10000 each;
#                         quick 1000); BENCH_SCALE_REPEATS runs with and without it (default
#                         3; quick 1); BENCH_SCALE_COUNT messages per perftest (default 500000)
#   BENCH_MEMORY_MESSAGES messages queued per case of the memory section (default 1000000;
#                         quick 200000, where memory freed by the warm-up blurs the figures)
#   BROKERJ_JAVA_OPTS     JVM options for Broker-J (default -Xmx2g)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${BENCH_OUT:-$here/out}
results=$here/results

brokerj=0
rabbitmq=0
publish=1
other=
all_sections=baselines,papers,amqp091,persistent,amqp1,cluster,bounds,scale,memory
sections=$all_sections
args=("$@")
while (( $# )); do
    case $1 in
        --brokerj) brokerj=1 ;;
        --rabbitmq) rabbitmq=1 ;;
        --quick) export BENCH_QUICK=1 ;;
        --sections) shift; sections=${1:?--sections needs a list} ;;
        --sections=*) sections=${1#--sections=} ;;
        --no-publish) publish=0 ;;
        -h|--help) sed -n '2,70p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *:*) other=$1 ;;
        *) echo "expected HOST:PORT, got $1" >&2; exit 2 ;;
    esac
    shift
done
for sec in ${sections//,/ }; do
    case $sec in
        baselines|papers|amqp091|persistent|amqp1|cluster|bounds|scale|memory) ;;
        *) echo "unknown section $sec (baselines, papers, amqp091, persistent, amqp1, cluster, bounds, scale, memory)" >&2; exit 2 ;;
    esac
done
want() { [[ ,$sections, == *",$1,"* ]]; }

sizes=(8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768)
perf_secs=${BENCH_PERF_SECS:-2}
perf_repeats=${BENCH_PERF_REPEATS:-3}
lat_secs=${BENCH_LAT_SECS:-8}
lat_repeats=${BENCH_LAT_REPEATS:-3}
net_secs=${BENCH_NET_SECS:-2}
pingpong_count=20000
scale_sizes=(256 1024)
scale_configs=("1 2" "1 4" "2 2" "4 4")   # "npubs=nsubs qt": one pair per queue on 2 and 4 queues, then more
amqp091_sizes=(16 256)
persistent_sizes=(256 4096)
persistent_pubs=(1 8)
amqp1_modes=(${BENCH_AMQP1_MODES:-unsettled settled})
scale_conns=${BENCH_SCALE_CONNECTIONS:-10000}
scale_queues=${BENCH_SCALE_QUEUES:-10000}
scale_reps=${BENCH_SCALE_REPEATS:-3}
scale_count=${BENCH_SCALE_COUNT:-500000}
memory_messages=${BENCH_MEMORY_MESSAGES:-1000000}
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
    sizes=(8 256 32768)
    perf_secs=${BENCH_PERF_SECS:-0.5}
    perf_repeats=${BENCH_PERF_REPEATS:-1}
    lat_secs=${BENCH_LAT_SECS:-2}
    lat_repeats=${BENCH_LAT_REPEATS:-1}
    net_secs=${BENCH_NET_SECS:-1}
    pingpong_count=5000
    scale_sizes=(256)
    scale_configs=("2 2")
    amqp091_sizes=(256)
    persistent_sizes=(256)
    persistent_pubs=(1)
    scale_conns=${BENCH_SCALE_CONNECTIONS:-1000}
    scale_queues=${BENCH_SCALE_QUEUES:-1000}
    scale_reps=${BENCH_SCALE_REPEATS:-1}
    scale_count=${BENCH_SCALE_COUNT:-100000}
    memory_messages=${BENCH_MEMORY_MESSAGES:-200000}
    publish=0
fi
# Optional cap on --count for other brokers (0: none). It was needed while Broker-J's
# 65,536-entry command buffer overflowed; `ferry perftest` now grants subscriber credit a
# window at a time (see crates/tools/src/perftest/credit.rs), so no cap is needed.
other_max_count=${BENCH_OTHER_MAX_COUNT:-0}
# Longest a perftest run may take; a run sized to $perf_secs takes a few seconds, so this only
# cuts off a hung run (Broker-J with several subscribers on a queue sometimes never finishes).
perf_timeout=${BENCH_PERF_TIMEOUT:-30}
# Longest one `ferry scale` run may take: opening and removing the load, and a perftest.
scale_timeout=$(( perf_timeout + 4 * 60 ))

started_at=$(date +%s)
mkdir -p "$out/raw"
rm -f "$out"/*.csv "$out"/*.png "$out"/commands.txt "$out"/BENCHMARKS.md
rm -rf "${out:?}"/raw/*

# ---------------------------------------------------------------- servers and cleanup
# shellcheck source=bench/cluster.sh
. "$here/cluster.sh"
# shellcheck source=bench/bounds.sh
. "$here/bounds.sh"
# shellcheck source=bench/scale.sh
. "$here/scale.sh"
# shellcheck source=bench/memory.sh
. "$here/memory.sh"
ferryd_pid=
ferryd_extra=()   # further ferryd options for the next start_ferryd
brokerj_pid=
stop_pid() {   # pid, seconds to wait after SIGTERM before SIGKILL; kills the process group
    local pid=$1 grace=$2 i
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for (( i = 0; i < grace * 10; i++ )); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "  $pid did not stop within ${grace}s; killing it" >&2
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
rabbitmq_pid=
rabbitmq_epmd_port=
cleanup() {
    stop_ferry_cluster
    stop_rabbitmq_cluster
    stop_pid "$ferryd_pid" 10
    stop_pid "$brokerj_pid" 30
    stop_rabbitmq
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits up to $3 seconds for a line matching $2 in file $1 while process $4 lives.
wait_for_line() {
    local file=$1 pattern=$2 secs=$3 pid=$4 i
    for (( i = 0; i < secs * 10; i++ )); do
        if grep -q -m1 -- "$pattern" "$file" 2>/dev/null; then return 0; fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Does this ferryd have the durable store? (--data-dir, issue 4.) Persistent rows need it.
ferryd_has_store() { "$ferryd" --help 2>/dev/null | grep -q -- '--data-dir'; }

start_ferryd() {
    local store=()
    if ferryd_has_store; then
        # A fresh store per start, under the run's directory: nothing from an earlier run or
        # from the invoking user's default data directory.
        rm -rf "$out/raw/ferryd-data"
        mkdir -p "$out/raw/ferryd-data"
        store=(--data-dir "$out/raw/ferryd-data")
    fi
    # The port line of an earlier start must not be taken for this one's: the redirect
    # below truncates the file only once the child runs.
    rm -f "$out/raw/ferryd.stdout"
    # setsid: its own process group, so stop_pid reaches everything it started.
    # Authentication on, as shipped; a users file that does not exist leaves the built-in
    # guest/guest, whatever the invoking user's own users file holds.
    setsid "$ferryd" --port 0 --interface 127.0.0.1 --users-file "$out/raw/no-such-users-file" \
        "${store[@]}" "${ferryd_extra[@]}" >"$out/raw/ferryd.stdout" 2>"$out/raw/ferryd.log" &
    ferryd_pid=$!
    if ! wait_for_line "$out/raw/ferryd.stdout" '^[0-9]' 20 "$ferryd_pid"; then
        echo "ferryd did not start; see $out/raw/ferryd.log" >&2
        exit 1
    fi
    ferryd_port=$(head -n 1 "$out/raw/ferryd.stdout")
    echo "ferryd pid $ferryd_pid on 127.0.0.1:$ferryd_port${store:+ (store in ${store[1]})}"
}

start_brokerj() {
    BROKERJ_OPLOG=WARN BROKERJ_JAVA_OPTS=${BROKERJ_JAVA_OPTS:--Xmx2g} \
        setsid "$root/interop/brokerj/start.sh" 0 >"$out/raw/brokerj.stdout" 2>"$out/raw/brokerj.log" &
    brokerj_pid=$!
    if ! wait_for_line "$out/raw/brokerj.stdout" '^BROKERJ READY' 300 "$brokerj_pid"; then
        echo "Broker-J did not start; see $out/raw/brokerj.log" >&2
        exit 1
    fi
    brokerj_port=$(sed -n -E 's/^BROKERJ READY [0-9.]+:([0-9]+).*/\1/p' "$out/raw/brokerj.stdout" | head -n 1)
    echo "Broker-J pid $brokerj_pid on 127.0.0.1:$brokerj_port"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

rabbitmq_bin=/usr/lib/rabbitmq/bin/rabbitmq-server
# Debian's rabbitmq-server, started by hand (never the system service): its own node name,
# ports, Mnesia and log directories under the run's directory, an empty plugin list, epmd on
# a port of its own, the Erlang distribution port on loopback. Stopped by stop_rabbitmq.
start_rabbitmq() {
    if [[ ! -x $rabbitmq_bin ]]; then
        echo "installing rabbitmq-server (apt-get)"
        if ! { apt-get install -y -qq rabbitmq-server >"$out/raw/apt.log" 2>&1 ||
               { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
                   apt-get install -y -qq rabbitmq-server; } >>"$out/raw/apt.log" 2>&1; }; then
            echo "could not install rabbitmq-server; see $out/raw/apt.log" >&2
            return 1
        fi
    fi
    local dir=$out/raw/rabbitmq
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "[]." >"$dir/enabled_plugins"
    rabbitmq_port=$(free_port)
    rabbitmq_epmd_port=$(free_port)
    local dist_port
    dist_port=$(free_port)
    env HOME="$dir" RABBITMQ_NODENAME="ferrybench-$$@localhost" \
        RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$rabbitmq_port" \
        RABBITMQ_DIST_PORT="$dist_port" ERL_EPMD_PORT="$rabbitmq_epmd_port" ERL_EPMD_ADDRESS=127.0.0.1 \
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
        RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONF_ENV_FILE="$dir/env.conf" \
        RABBITMQ_CONFIG_FILE="$dir/rabbitmq" RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config" \
        RABBITMQ_PID_FILE="$dir/pid" \
        setsid "$rabbitmq_bin" >"$out/raw/rabbitmq.stdout" 2>"$out/raw/rabbitmq.log" &
    rabbitmq_pid=$!
    if ! wait_for_line "$out/raw/rabbitmq.stdout" 'Starting broker.*completed' 120 "$rabbitmq_pid"; then
        echo "RabbitMQ did not start; see $out/raw/rabbitmq.stdout and $dir/log" >&2
        stop_rabbitmq
        return 1
    fi
    # The VM itself, for CPU accounting (the launcher is a shell script).
    rabbitmq_vm_pid=$(cat "$dir/pid" 2>/dev/null || echo "$rabbitmq_pid")
    echo "RabbitMQ $(rabbitmq_version) pid $rabbitmq_vm_pid on 127.0.0.1:$rabbitmq_port"
}

rabbitmq_version() { dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || echo unknown; }

stop_rabbitmq() {
    stop_pid "$rabbitmq_pid" 30
    rabbitmq_pid=
    # epmd daemonizes out of the launcher's process group; it has a port of its own.
    if [[ -n $rabbitmq_epmd_port ]]; then
        epmd -port "$rabbitmq_epmd_port" -kill >/dev/null 2>&1 || true
        rabbitmq_epmd_port=
    fi
}

# ---------------------------------------------------------------- helpers
# The command lines, as run, for the report.
log_cmd() { printf '%s\n' "$*" | sed "s#$root/##g" >>"$out/commands.txt"; }

# Runs a `ferry ... --csv` command (bounded by timeout) and appends its row to a CSV file,
# writing the header only into an empty file.
append_csv() {
    local file=$1; shift
    local rows
    log_cmd "$@"
    if ! rows=$(timeout -k 5 60 "$@"); then
        echo "  failed: $*" >&2
        return 0
    fi
    if [[ -s $file ]]; then
        tail -n +2 <<<"$rows" >>"$file"
    else
        printf '%s\n' "$rows" >"$file"
    fi
}

# Messages for a netbench throughput run: time decides (--time-limit), so small messages
# batched 64 to a write run as long as large ones instead of finishing in milliseconds.
netbench_unbounded_count=1000000000000

# CPU accounting around a broker run: machine-wide busy fraction (all CPUs) from /proc/stat
# and the broker process's CPU time, so the report can say what was saturated.
clk_tck=$(getconf CLK_TCK)
ncpu=$(nproc)
cpu_sample() {   # prints "busy_ticks total_ticks broker_ticks"
    local pid=$1 busy total bt=0
    read -r busy total < <(awk '/^cpu /{t=0; for(i=2;i<=9;i++) t+=$i; print t-$5-$6, t}' /proc/stat)
    if [[ -n $pid && -r /proc/$pid/stat ]]; then
        bt=$(awk '{print $14+$15}' "/proc/$pid/stat")
        # Broker-J's launcher execs java, so $pid is the JVM; ferryd is $pid itself.
    fi
    echo "$busy $total $bt"
}
cpu_delta() {    # before after -> "machine_busy_pct broker_cores"
    awk -v a="$1" -v b="$2" -v hz="$clk_tck" -v secs="$3" 'BEGIN {
        split(a, x, " "); split(b, y, " ");
        dt = y[2] - x[2]; busy = (dt > 0) ? 100 * (y[1] - x[1]) / dt : 0;
        cores = (secs > 0) ? (y[3] - x[3]) / hz / secs : 0;
        printf "%.1f,%.2f", busy, cores }'
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# Waits, at most 3 s, until the machine is nearly idle: what one broker does after its run
# (a store's compaction, a VM's collection) must not land on another broker's turn.
quiet_machine() {
    local a b i
    for (( i = 0; i < 15; i++ )); do
        a=$(cpu_sample ""); sleep 0.2; b=$(cpu_sample "")
        awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
            dt = y[2] - x[2]; exit !(dt > 0 && (y[1] - x[1]) / dt < 0.10) }' && break
    done
    return 0
}

# ---------------------------------------------------------------- netbench baselines
netbench_pingpong() {
    echo "netbench pingpong (round trips: back-to-back, and paced at 10k/s)"
    local s rate
    for rate in 0 10000; do
        for s in "${sizes[@]}"; do
            append_csv "$out/latency.csv" "$ferry" netbench pingpong --size "$s" --rate "$rate" \
                --count "$pingpong_count" --warmup 1000 --time-limit 10 --tcp-nodelay --csv
        done
    done
}

netbench_stream() {
    echo "netbench stream (one-way throughput, 1 and 64 messages per write)"
    local batch s
    for batch in 1 64; do
        for s in "${sizes[@]}"; do
            append_csv "$out/throughput.csv" "$ferry" netbench stream --size "$s" \
                --count "$netbench_unbounded_count" --batch "$batch" --time-limit "$net_secs" --csv
        done
    done
}

netbench_relay() {
    echo "netbench relay (producer -> relay -> consumer)"
    local batch s
    for batch in 1 64; do
        for s in "${sizes[@]}"; do
            append_csv "$out/throughput.csv" "$ferry" netbench relay --size "$s" \
                --count "$netbench_unbounded_count" --batch "$batch" --time-limit "$net_secs" --csv
        done
    done
    # One-way latency through the relay at the papers' 10k msg/s; the stamp needs 16 bytes.
    for s in "${sizes[@]}"; do
        (( s >= 16 )) || continue
        append_csv "$out/latency.csv" "$ferry" netbench relay --latency --rate 10000 \
            --size "$s" --count 20000 --time-limit 5 --tcp-nodelay --csv
    done
}

# The device's own rate of durable appends, where ferryd keeps its store: the bound for
# persistent messages confirmed only after their sync.
netbench_fsync() {
    echo "netbench fsync (append + fdatasync, in $out/raw)"
    local s
    for s in 256 4096; do
        append_csv "$out/fsync.csv" "$ferry" netbench fsync --dir "$out/raw" --size "$s" \
            --time-limit "$(( net_secs * 2 ))" --csv
    done
}

# ---------------------------------------------------------------- broker rows
# Broker under test: label, host, port, pid (for CPU accounting; may be empty), max count,
# extra connection options.
b_label= b_host= b_port= b_pid= b_max= b_auth=()
set_broker() {
    b_label=$1 b_host=$2 b_port=$3 b_pid=$4 b_max=$5; shift 5
    b_auth=("$@")
}

# The broker under test by name, once started: ferryd or rabbitmq.
use_broker() {
    case $1 in
        ferryd) set_broker ferryd 127.0.0.1 "$ferryd_port" "$ferryd_pid" 0 \
            --username guest --password guest ;;
        rabbitmq) set_broker rabbitmq 127.0.0.1 "$rabbitmq_port" "$rabbitmq_vm_pid" \
            "$other_max_count" --username guest --password guest ;;
        *) echo "use_broker: unknown broker $1" >&2; return 1 ;;
    esac
}

# Extra `ferry perftest` / `ferry latency-test` options for the points being run (protocol,
# durability, confirms), and where their rows go: the CSV file and the columns that identify
# the point in it before the common ones.
pt_extra=()
pt_csv=
pt_prefix=
pt_pilot_min=

# One `ferry perftest -s` run; prints "pubs subs transfers mbytes" (tab-separated) or fails.
perftest_once() {   # size npubs nsubs qt count rawfile
    local size=$1 n=$2 qt=$4 count=$5 raw=$6
    local cmd=("$ferry" perftest -b "$b_host" -p "$b_port" "${b_auth[@]}" "${pt_extra[@]}" -s
        --size "$size" --npubs "$n" --nsubs "$3" --qt "$qt" --count "$count"
        --base-name "bench-$$-$RANDOM")
    log_cmd "${cmd[@]}"
    # bash's `time` reports the CPU time of the harness process (user, sys) into $raw.cpu.
    local TIMEFORMAT='%U %S' rc=0
    { time timeout -k 5 "$perf_timeout" "${cmd[@]}" >"$raw" 2>&1 || rc=$?; } 2>"$raw.cpu"
    if (( rc != 0 )); then
        echo "  perftest failed ($b_label $pt_prefix size $size npubs $n qt $qt count $count): $(tail -n 1 "$raw" || true)" >&2
        return 1
    fi
    awk -F '\t' 'NF == 4 { line = $0 } END { if (line == "") exit 1; print line }' "$raw"
}

# Messages per publisher so that a run takes about $perf_secs: from the pilot's
# transfers/s (measured by the harness from "start" to the last report).
count_for() {   # transfers_per_sec size npubs qt nsubs
    awk -v r="$1" -v size="$2" -v n="$3" -v qt="$4" -v ns="$5" -v secs="$perf_secs" -v max="$b_max" 'BEGIN {
        per_msg = (n + ns) * qt;              # each message: one publish, one delivery
        c = r * secs / per_msg;
        bytes_cap = 2 * 1024 * 1024 * 1024 / size / (n * qt);   # 2 GiB per run at most
        if (c > bytes_cap) c = bytes_cap;
        if (c > 2000000) c = 2000000;
        if (max > 0 && c > max) c = max;
        if (c < 2000) c = 2000;
        printf "%d", c }'
}

perftest_point() {   # size npubs qt repeats [nsubs]
    local size=$1 n=$2 qt=$3 reps=$4 ns=${5:-$2} count rep
    count=$(perftest_pilot "$size" "$n" "$qt" "$ns") || return 0
    for (( rep = 1; rep <= reps; rep++ )); do
        perftest_rep "$size" "$n" "$qt" "$ns" "$count" "$rep"
    done
    perftest_summary "$size" "$n" "$qt" "$ns" "$count" "$reps"
}

perftest_tag() { echo "$b_label${pt_prefix:+-${pt_prefix//,/-}}-$1-$2-$4-$3"; }   # size npubs qt nsubs

# Pilot: a small run that sizes the real ones and warms the broker (a JVM's JIT too). Prints
# the count for the repetitions; fails (with a failed row) if the pilot does.
perftest_pilot() {   # size npubs qt nsubs
    local size=$1 n=$2 qt=$3 ns=$4 pilot line
    local csv=${pt_csv:-$out/perftest.csv} prefix=${pt_prefix:+$pt_prefix,}
    pilot=$(( 64 * 1024 * 1024 / size / (n * qt) ))
    (( pilot > 20000 )) && pilot=20000
    (( pilot < 1000 )) && pilot=1000
    if [[ -n ${pt_pilot_min:-} ]]; then
        # A longer pilot where a broker's first credit makes a short one unrepresentative
        # (Broker-J gives a 1.0 sender 20,000 credits, then tops up a settled sender's one
        # message at a time): at most 256 MiB.
        local want=$(( 256 * 1024 * 1024 / size / (n * qt) ))
        (( want > pt_pilot_min )) && want=$pt_pilot_min
        (( pilot < want )) && pilot=$want
    fi
    if ! line=$(perftest_once "$size" "$n" "$ns" "$qt" "$pilot" \
            "$out/raw/perftest-$(perftest_tag "$size" "$n" "$qt" "$ns")-pilot.txt"); then
        echo "$b_label,$prefix$size,$n,$ns,$qt,$pilot,pilot,,,,,,,,,failed" >>"$csv"
        return 1
    fi
    count_for "$(cut -f3 <<<"$line")" "$size" "$n" "$qt" "$ns"
}

# Repetition $6 of a point, `count` messages per publisher: one row.
perftest_rep() {   # size npubs qt nsubs count rep
    local size=$1 n=$2 qt=$3 ns=$4 count=$5 rep=$6 line t0 t1 c0 c1 secs cpu raw
    local csv=${pt_csv:-$out/perftest.csv} prefix=${pt_prefix:+$pt_prefix,}
    raw=$out/raw/perftest-$(perftest_tag "$size" "$n" "$qt" "$ns")-$rep.txt
    c0=$(cpu_sample "$b_pid"); t0=$(now)
    if line=$(perftest_once "$size" "$n" "$ns" "$qt" "$count" "$raw"); then
        t1=$(now); c1=$(cpu_sample "$b_pid"); secs=$(elapsed "$t0" "$t1")
        cpu=$(cpu_delta "$c0" "$c1" "$secs")
        cpu+=,$(awk -v secs="$secs" '{ printf "%.2f", ($1 + $2) / secs }' "$raw.cpu")
        awk -F '\t' -v pre="$b_label,$prefix$size,$n,$ns,$qt,$count,$rep" -v post="$secs,$cpu" \
            '{ printf "%s,%s,%s,%s,%s,%s,ok\n", pre, $1, $2, $3, $4, post }' <<<"$line" >>"$csv"
    else
        echo "$b_label,$prefix$size,$n,$ns,$qt,$count,$rep,,,,,,,,,failed" >>"$csv"
    fi
}

# One line on the terminal: the point's repetitions' transfers/s.
perftest_summary() {   # size npubs qt nsubs count reps
    local csv=${pt_csv:-$out/perftest.csv} prefix=${pt_prefix:+$pt_prefix,}
    local rates
    rates=$(awk -F, -v pre="$b_label,$prefix$1,$2,$4,$3,$5," -v reps="$6" '
        index($0, pre) == 1 && $NF == "ok" { r[++n] = $(NF - 6) }
        END { for (i = n - reps + 1; i <= n; i++) if (i > 0) printf "%s%s", (i > n - reps + 1 ? " " : ""), r[i] }' "$csv")
    printf '  %-8s %-16s %6s B  npubs=%s nsubs=%s qt=%s  count %-8s %s transfers/s\n' \
        "$b_label" "$pt_prefix" "$1" "$2" "$4" "$3" "$5" "${rates:-failed}"
}

# A row saying the point was not measured and why, for the report to show.
unavailable_point() {   # size npubs nsubs qt
    local csv=${pt_csv:-$out/perftest.csv} prefix=${pt_prefix:+$pt_prefix,}
    echo "$b_label,$prefix$1,$2,$3,$4,,,,,,,,,,,unavailable" >>"$csv"
}

broker_perftest() {
    echo "perftest against $b_label (127.0.0.1:$b_port): 1 pub / 1 sub / 1 queue, every size"
    local s cfg
    for s in "${sizes[@]}"; do
        perftest_point "$s" 1 1 "$perf_repeats"
    done
    echo "perftest against $b_label: npubs=nsubs x qt"
    for s in "${scale_sizes[@]}"; do
        for cfg in "${scale_configs[@]}"; do
            # shellcheck disable=SC2086
            perftest_point "$s" $cfg "$(( perf_repeats > 1 ? 2 : 1 ))"
        done
    done
}

# ferry latency-test prints both views of the final summary:
#   Sent N msgs in Tms (R msgs/s)
#   Latency(ms) over N samples: min=.. avg=.. max=.. p50=.. p90=.. p99=.. p99.9=..
#     (from actual send time, not corrected for coordinated omission: min=.. ...)
# Every size is measured $lat_repeats times, a sweep over the sizes at a time, so a burst
# of other work on the machine lands on one run of a size rather than on all of them; the
# report takes the median and shows each run's figures.
broker_latency() {
    echo "latency-test against $b_label: --rate 10000 --tcp-nodelay, ${lat_secs}s per size, $lat_repeats runs"
    local s rep
    latency_warmup
    for (( rep = 1; rep <= lat_repeats; rep++ )); do
        for s in "${sizes[@]}"; do
            latency_point "$s" 10000 "$rep"
        done
    done
}

# A short unrecorded run first, so the first size does not pay for warm-up.
latency_warmup() {
    timeout -k 5 30 "$ferry" latency-test -b "$b_host" -p "$b_port" "${b_auth[@]}" "${pt_extra[@]}" \
        --rate 10000 --tcp-nodelay --size 256 --time-limit 2 >/dev/null 2>&1 || true
}

# The host's steal time (its other guests running on our CPUs) in ticks so far.
steal_ticks() { awk '/^cpu / { print $9 }' /proc/stat; }

# One latency-test run (repetition $3, default 1) into ${pt_csv:-latency_test.csv}: rows for
# the corrected and the actual figures and the sender's lateness, each with the CPU the
# machine, the broker and the harness used and the share of time the host stole: a run
# whose harness and broker leave much of the busy time unexplained shared the machine.
latency_point() {   # size rate [rep]
    local s=$1 rate=$2 rp=${3:-1} raw cmd sent achieved corr act late c0 c1 t0 t1 secs cpu try
    local st0 st1 harness steal
    local csv=${pt_csv:-$out/latency_test.csv} prefix=${pt_prefix:+$pt_prefix,}
    raw=$out/raw/latency-$b_label${pt_prefix:+-${pt_prefix//,/-}}-$s-r$rp.txt
    cmd=("$ferry" latency-test -b "$b_host" -p "$b_port" "${b_auth[@]}" "${pt_extra[@]}" --rate "$rate"
        --tcp-nodelay --size "$s" --time-limit "$lat_secs")
    # bash's `time` reports the harness's CPU time (user, sys) into $raw.cpu.
    local TIMEFORMAT='%U %S' rc
    for try in 1 2; do
        log_cmd "${cmd[@]}"
        c0=$(cpu_sample "$b_pid"); st0=$(steal_ticks); t0=$(now)
        rc=0
        { time timeout -k 5 $(( lat_secs + 30 )) "${cmd[@]}" >"$raw" 2>&1 || rc=$?; } 2>"$raw.cpu"
        (( rc == 0 )) && break
        # Kept as a failed row; a second failure leaves the run without figures.
        echo "  latency-test failed ($b_label $pt_prefix size $s run $rp, try $try): $(tail -n 1 "$raw" || true)" >&2
        mv "$raw" "$raw.failed-$try"
        echo "$b_label,$prefix$s,$rate,$lat_secs,$rp,,,corrected,,,,,,,,,,,,failed" >>"$csv"
        (( try == 2 )) && return 0
    done
    t1=$(now); c1=$(cpu_sample "$b_pid"); st1=$(steal_ticks); secs=$(elapsed "$t0" "$t1")
    cpu=$(cpu_delta "$c0" "$c1" "$secs")
    harness=$(awk -v secs="$secs" '{ printf "%.2f", ($1 + $2) / secs }' "$raw.cpu")
    steal=$(awk -v a="$st0" -v b="$st1" -v hz="$clk_tck" -v secs="$secs" -v n="$ncpu" \
        'BEGIN { printf "%.1f", (secs > 0) ? 100 * (b - a) / hz / secs / n : 0 }')
    read -r sent achieved < <(sed -n -E 's/^Sent ([0-9]+) msgs in [0-9]+ms \(([0-9]+) msgs\/s\).*/\1 \2/p' "$raw")
    # "min=a avg=b ..." -> "a,b,..." (min,avg,max,p50,p90,p99,p99.9)
    corr=$(grep '^Latency(ms) over' "$raw" | sed -E 's/.*samples: //; s/[a-z0-9.]+=//g; s/ +/,/g')
    act=$(grep 'from actual send time' "$raw" | sed -E 's/.*omission: //; s/\)$//; s/[a-z0-9.]+=//g; s/ +/,/g')
    local cols=$cpu,$harness,$steal,ok
    echo "$b_label,$prefix$s,$rate,$lat_secs,$rp,$sent,$achieved,corrected,$corr,$cols" >>"$csv"
    echo "$b_label,$prefix$s,$rate,$lat_secs,$rp,$sent,$achieved,actual,$act,$cols" >>"$csv"
    # How far behind its schedule the sender was: p50, p99, p99.9, max into those columns.
    late=$(sed -n -E 's/.*behind its schedule: p50=([0-9.]+) p99=([0-9.]+) p99.9=([0-9.]+) max=([0-9.]+).*/,,,\4,\1,,\2,\3/p' "$raw")
    [[ -n $late ]] && echo "$b_label,$prefix$s,$rate,$lat_secs,$rp,$sent,$achieved,sender_lateness$late,$cols" >>"$csv"
    printf '  %-8s %-16s %6s B  run %s  avg %s ms  p99 %s ms (corrected)\n' "$b_label" "$pt_prefix" "$s" \
        "$rp" "$(cut -d, -f2 <<<"$corr")" "$(cut -d, -f6 <<<"$corr")"
}

measure_broker() {
    broker_perftest
    broker_latency
}

# ---------------------------------------------------------------- AMQP 0-9-1 side by side
# Issue 5's matrix with the same harness over 0-9-1: transient and persistent (durable queue,
# delivery mode 2), without and with publisher confirms (window 100), 16 and 256 B; 1 pub,
# 1 sub, 1 queue; the subscriber acknowledges every 100 with `multiple`, prefetch 1000.
# Then 2-hop latency at 10k msg/s, 256 B. The brokers named take turns a repetition at a
# time (a pilot each first): the host's speed drifts over the minutes the section takes, and
# the figures read are ferryd's ratios to RabbitMQ, so the drift must weigh on both alike.
amqp091_header="broker,persistent,confirm,size,npubs,nsubs,qt,count,rep,pubs_per_sec,subs_per_sec,transfers_per_sec,mbytes_per_sec,wall_secs,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,status"
measure_amqp091() {   # broker... (ferryd, rabbitmq)
    local persistent confirm s b rep
    local -A count
    echo "perftest over AMQP 0-9-1 against $*, in turn"
    (( $# > 1 )) && meta amqp091_in_turn yes
    pt_csv=$out/amqp091.csv
    for persistent in no yes; do
        for confirm in 0 100; do
            pt_prefix=$persistent,$confirm
            pt_extra=(--protocol amqp0-9-1 --sub-ack 100 --prefetch 1000 --durable "$persistent")
            (( confirm > 0 )) && pt_extra+=(--confirm "$confirm")
            for s in "${amqp091_sizes[@]}"; do
                count=()
                for b in "$@"; do
                    use_broker "$b"
                    if [[ $persistent == yes && $b == ferryd && $ferryd_store != 1 ]]; then
                        unavailable_point "$s" 1 1 1
                    elif ! count[$b]=$(perftest_pilot "$s" 1 1 1); then
                        unset "count[$b]"
                    fi
                done
                for (( rep = 1; rep <= perf_repeats; rep++ )); do
                    for b in "$@"; do
                        [[ -n ${count[$b]:-} ]] || continue
                        use_broker "$b"
                        (( $# > 1 )) && quiet_machine
                        perftest_rep "$s" 1 1 1 "${count[$b]}" "$rep"
                    done
                done
                for b in "$@"; do
                    [[ -n ${count[$b]:-} ]] || continue
                    use_broker "$b"
                    perftest_summary "$s" 1 1 1 "${count[$b]}" "$perf_repeats"
                done
            done
        done
    done
    for b in "$@"; do
        use_broker "$b"
        echo "latency-test over AMQP 0-9-1 against $b_label"
        pt_csv=$out/amqp091_latency.csv pt_prefix=no pt_extra=(--protocol amqp0-9-1)
        latency_warmup
        latency_point 256 10000
    done
    pt_csv= pt_prefix= pt_extra=()
}

# ---------------------------------------------------------------- persistent (durable store)
# Issue 4: persistent throughput at 256 B and 4 KiB with 1 and 8 publishers (one subscriber,
# one durable queue, delivery mode persistent), over 0-10 where a transfer is completed only
# after the store's sync; and 2-hop latency of persistent messages at 1,000 msg/s (a rate
# every fsync policy can carry, so the figure is the sync's cost, not a backlog's).
persistent_header="broker,protocol,size,npubs,nsubs,qt,count,rep,pubs_per_sec,subs_per_sec,transfers_per_sec,mbytes_per_sec,wall_secs,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,status"
persistent_latency_header="broker,protocol,size,rate,time_limit,rep,sent,achieved_rate,view,min_ms,avg_ms,max_ms,p50_ms,p90_ms,p99_ms,p999_ms,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,steal_pct,status"
measure_persistent() {
    local durable_ok=$1 s n
    echo "persistent perftest against $b_label (--durable yes)"
    pt_csv=$out/persistent.csv pt_prefix=amqp0-10 pt_extra=(--durable yes)
    for s in "${persistent_sizes[@]}"; do
        for n in "${persistent_pubs[@]}"; do
            if [[ $durable_ok != 1 ]]; then
                unavailable_point "$s" "$n" 1 1
            else
                perftest_point "$s" "$n" 1 "$perf_repeats" 1
            fi
        done
    done
    if [[ $durable_ok == 1 ]]; then
        echo "persistent latency-test against $b_label (--durable yes, 1000 msg/s)"
        pt_csv=$out/persistent_latency.csv
        for s in "${persistent_sizes[@]}"; do
            latency_point "$s" 1000
        done
    fi
    pt_csv= pt_prefix= pt_extra=()
}

# ---------------------------------------------------------------- AMQP 1.0 side by side
# The papers' sizes over AMQP 1.0, 1 pub / 1 sub / 1 queue, in each settlement mode:
#   unsettled  --confirm 1000 --sub-ack 100: at least once both ways (the publisher keeps up
#              to 1000 transfers waiting for the broker's settlement, the subscriber's
#              deliveries come unsettled and are accepted every 100 with one disposition);
#   settled    at most once both ways (settled transfers, settled deliveries);
# credit window 1000 either way. Then 2-hop latency at 10k msg/s (the sender's transfers
# settled, the receiver's credit window 100, accepting every 50).
amqp1_header="broker,mode,size,npubs,nsubs,qt,count,rep,pubs_per_sec,subs_per_sec,transfers_per_sec,mbytes_per_sec,wall_secs,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,status"
amqp1_latency_header="broker,mode,size,rate,time_limit,rep,sent,achieved_rate,view,min_ms,avg_ms,max_ms,p50_ms,p90_ms,p99_ms,p999_ms,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,steal_pct,status"
measure_amqp1() {
    local mode s
    meta "load_${b_label}_amqp1_start" "$(cut -d' ' -f1-3 /proc/loadavg)"
    pt_csv=$out/amqp1.csv pt_pilot_min=50000
    for mode in "${amqp1_modes[@]}"; do
        echo "perftest over AMQP 1.0 ($mode) against $b_label (127.0.0.1:$b_port)"
        pt_prefix=$mode
        case $mode in
            unsettled) pt_extra=(--protocol amqp1.0 --confirm 1000 --sub-ack 100) ;;
            settled) pt_extra=(--protocol amqp1.0) ;;
            *) echo "unknown AMQP 1.0 mode $mode (unsettled, settled)" >&2; exit 2 ;;
        esac
        for s in "${sizes[@]}"; do
            perftest_point "$s" 1 1 "$perf_repeats"
        done
    done
    echo "latency-test over AMQP 1.0 against $b_label"
    pt_csv=$out/amqp1_latency.csv pt_prefix=prefetch100 pt_extra=(--protocol amqp1.0) pt_pilot_min=
    latency_warmup
    for s in "${sizes[@]}"; do
        latency_point "$s" 10000
    done
    pt_csv= pt_prefix= pt_extra=()
    meta "load_${b_label}_amqp1_end" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

# ---------------------------------------------------------------- machine and versions
meta() { printf '%s,"%s"\n' "$1" "${2//\"/\"\"}" >>"$out/meta.csv"; }
write_meta() {
    echo "key,value" >"$out/meta.csv"
    meta date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    meta host_nproc "$(nproc)"
    meta host_cpu "$(sed -n -E 's/^model name\s*:\s*//p' /proc/cpuinfo | head -n 1)"
    meta host_kernel "$(uname -srm)"
    meta host_memory "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    meta host_os "$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null || echo unknown)"
    meta git_commit "$(git -C "$root" rev-parse --short HEAD)"
    meta git_dirty "$(git -C "$root" status --porcelain --untracked-files=no -- crates Cargo.toml Cargo.lock | wc -l) modified tracked files under crates/, Cargo.*"
    meta ferryd_version "$("$ferryd" --version 2>&1 | head -n 1)"
    meta ferry_version "$("$ferry" --version 2>&1 | head -n 1)"
    meta rustc "$(rustc --version 2>/dev/null || echo unknown)"
    meta invocation "bench/run.sh${*:+ $*}"
    meta load_at_start "$(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min load averages before the run; 2 CPUs)"
    meta sections "$sections"
    meta quick "${BENCH_QUICK:-0}"
    meta perf_secs "$perf_secs"
    meta perf_repeats "$perf_repeats"
    meta lat_secs "$lat_secs"
    meta lat_repeats "$lat_repeats"
    meta other_max_count "$other_max_count"
    meta ferryd_options "--port 0 --interface 127.0.0.1 --users-file (none: guest/guest)$(ferryd_has_store && echo " --data-dir (fresh, under the run's directory)") (defaults otherwise: worker threads = CPUs, tcp-nodelay yes)"
    meta ferryd_store "$(ferryd_has_store && echo yes || echo no)"
    meta net_secs "$net_secs"
    if (( brokerj )); then
        meta brokerj_version "Apache Qpid Broker-J $(sed -n -E 's/.*<brokerj.version>(.*)<\/brokerj.version>.*/\1/p' "$root/interop/brokerj/pom.xml" | head -n 1), in-memory virtual host"
        meta java_version "$(java -version 2>&1 | head -n 1)"
        meta brokerj_java_opts "${BROKERJ_JAVA_OPTS:--Xmx2g}"
    fi
    if (( rabbitmq )); then
        meta rabbitmq_version "RabbitMQ $(rabbitmq_version) (Debian package), started by the script with default settings, no plugins"
        meta erlang_version "$(dpkg-query -W -f '${Version}' erlang-base 2>/dev/null || echo unknown)"
    fi
}

# ---------------------------------------------------------------- the run
cargo build --release -p ferry-tools -p ferryd --manifest-path "$root/Cargo.toml"
bin=${CARGO_TARGET_DIR:-$root/target}/release
ferry=$bin/ferry
ferryd=$bin/ferryd
write_meta "${args[@]}"

echo "broker,size,npubs,nsubs,qt,count,rep,pubs_per_sec,subs_per_sec,transfers_per_sec,mbytes_per_sec,wall_secs,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,status" >"$out/perftest.csv"
lat_cols="sent,achieved_rate,view,min_ms,avg_ms,max_ms,p50_ms,p90_ms,p99_ms,p999_ms,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,steal_pct,status"
echo "broker,size,rate,time_limit,rep,$lat_cols" >"$out/latency_test.csv"
echo "$amqp091_header" >"$out/amqp091.csv"
echo "broker,persistent,size,rate,time_limit,rep,$lat_cols" >"$out/amqp091_latency.csv"
echo "$persistent_header" >"$out/persistent.csv"
echo "$persistent_latency_header" >"$out/persistent_latency.csv"
echo "$amqp1_header" >"$out/amqp1.csv"
echo "$amqp1_latency_header" >"$out/amqp1_latency.csv"
echo "$cluster_header" >"$out/cluster.csv"
echo "$bounds_header" >"$out/bounds.csv"
echo "$scale_header" >"$out/scale.csv"
echo "$scale_cpu_header" >"$out/scale_cpu.csv"
echo "$memory_header" >"$out/memory.csv"

# Baselines first, with no broker running, so nothing competes for the two CPUs.
if want baselines; then
    netbench_pingpong
    netbench_stream
    netbench_relay
    netbench_fsync
fi

ferryd_store=0
ferryd_has_store && ferryd_store=1
if want papers || want amqp091 || want persistent || want amqp1 || want bounds; then
    start_ferryd
    use_broker ferryd
    want papers && measure_broker
    if want amqp091; then
        if (( rabbitmq )) && start_rabbitmq; then
            measure_amqp091 ferryd rabbitmq
            stop_rabbitmq
        else
            measure_amqp091 ferryd
        fi
        use_broker ferryd
    fi
    want persistent && measure_persistent "$ferryd_store"
    want amqp1 && measure_amqp1
    want bounds && measure_bounds
    stop_pid "$ferryd_pid" 10; ferryd_pid=
fi

if { want papers || want amqp1; } && (( brokerj )); then
    start_brokerj
    set_broker brokerj 127.0.0.1 "$brokerj_port" "$brokerj_pid" "$other_max_count" \
        --username guest --password guest
    want papers && measure_broker
    want amqp1 && measure_amqp1
    stop_pid "$brokerj_pid" 30; brokerj_pid=
fi
if want papers && [[ -n $other ]]; then
    set_broker "${BENCH_OTHER_LABEL:-other}" "${other%:*}" "${other##*:}" "" "$other_max_count" \
        --username "${BENCH_OTHER_USER:-guest}" --password "${BENCH_OTHER_PASSWORD:-guest}"
    measure_broker
fi
if want cluster; then
    measure_cluster
fi

if want scale; then
    measure_scale
fi

if want memory; then
    measure_memory
fi

meta duration_secs "$(( $(date +%s) - started_at ))"
meta load_at_end "$(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min load averages after the run)"

# ---------------------------------------------------------------- charts and report
venv=$here/.venv
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -c 'import matplotlib' 2>/dev/null ||
    "$venv/bin/pip" install --quiet 'matplotlib>=3.7'
"$venv/bin/python" "$here/plot.py" "$out"
"$venv/bin/python" "$here/report.py" "$out" "$out/BENCHMARKS.md"
if (( publish )) && [[ $sections == "$all_sections" ]]; then
    mkdir -p "$results"
    rm -f "$results"/*.csv "$results"/*.png "$results"/commands*.txt
    cp "$out"/*.csv "$out"/*.png "$out"/commands.txt "$results"/
    "$venv/bin/python" "$here/report.py" "$results" "$root/BENCHMARKS.md"
    echo "published: bench/results/ and BENCHMARKS.md"
elif (( publish )) && [[ $sections == amqp1 || $sections == cluster || $sections == bounds || $sections == scale || $sections == memory ]]; then
    # Only this section's figures replace the committed ones; the other sections' CSVs,
    # charts, meta.csv and commands.txt stay as they were, and the report is rewritten
    # from the merge (the section says when and under what load it was measured).
    sec=$sections
    mkdir -p "$results"
    rm -f "$results"/"$sec"*.csv "$results"/"$sec"*.png "$results/meta_$sec.csv" "$results/commands_$sec.txt"
    cp "$out"/"$sec"*.csv "$results"/
    cp "$out"/"$sec"*.png "$results"/ 2>/dev/null || true
    cp "$out/meta.csv" "$results/meta_$sec.csv"
    cp "$out/commands.txt" "$results/commands_$sec.txt"
    "$venv/bin/python" "$here/report.py" "$results" "$root/BENCHMARKS.md"
    echo "published: the $sec section into bench/results/ and BENCHMARKS.md"
elif (( publish )); then
    echo "not publishing: only a run of all sections, or of amqp1, cluster, bounds, scale or memory alone, is published"
fi
echo "results in $out ($(( $(date +%s) - started_at ))s)"
