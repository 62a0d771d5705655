#!/usr/bin/env bash
# Ferry benchmarks: the MRG papers' matrix against ferryd, beside the loopback baselines and
# (optionally) a second AMQP 0-10 broker.
#
#   bench/run.sh [--brokerj] [--no-publish] [OTHER_HOST:PORT]
#
#   --brokerj         also start Apache Qpid Broker-J (interop/brokerj/start.sh) on a free
#                     loopback port, measure it with the same harnesses, and stop it
#   OTHER_HOST:PORT   also measure an AMQP 0-10 broker that is already running there
#                     (label it with BENCH_OTHER_LABEL, default "other"; credentials with
#                     BENCH_OTHER_USER / BENCH_OTHER_PASSWORD, default guest/guest)
#   --no-publish      leave bench/results/ and BENCHMARKS.md alone (BENCH_QUICK implies it)
#
# What it does: builds the release `ferry` and `ferryd`, starts ferryd on a free loopback port,
# runs netbench (pingpong, stream, relay) over the papers' sizes, `ferry perftest -s` for every
# size (1 pub/1 sub/1 queue, repeated) and a few npubs=nsubs x qt points, and
# `ferry latency-test --rate 10000 --tcp-nodelay` for every size; the same broker rows for the
# other brokers. Every figure lands as CSV under bench/out/ (or $BENCH_OUT); bench/plot.py
# draws the charts and bench/report.py writes the report. A full run then copies the CSVs and
# charts to bench/results/ and writes BENCHMARKS.md at the repository root.
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
#   BENCH_OTHER_MAX_COUNT messages per publisher at most for other brokers (default 0: no cap)
#   BROKERJ_JAVA_OPTS     JVM options for Broker-J (default -Xmx2g)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${BENCH_OUT:-$here/out}
results=$here/results

brokerj=0
publish=1
other=
for arg in "$@"; do
    case $arg in
        --brokerj) brokerj=1 ;;
        --no-publish) publish=0 ;;
        -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
        -*) echo "unknown option $arg" >&2; exit 2 ;;
        *:*) other=$arg ;;
        *) echo "expected HOST:PORT, got $arg" >&2; exit 2 ;;
    esac
done

sizes=(8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768)
perf_secs=${BENCH_PERF_SECS:-2}
perf_repeats=${BENCH_PERF_REPEATS:-3}
lat_secs=${BENCH_LAT_SECS:-8}
pingpong_count=20000
scale_sizes=(256 1024)
scale_configs=("2 2" "4 4")   # "npubs=nsubs qt"
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
    sizes=(8 256 32768)
    perf_secs=${BENCH_PERF_SECS:-0.5}
    perf_repeats=${BENCH_PERF_REPEATS:-1}
    lat_secs=${BENCH_LAT_SECS:-2}
    pingpong_count=5000
    scale_sizes=(256)
    scale_configs=("2 2")
    publish=0
fi
# Optional cap on --count for other brokers (0: none). It was needed while Broker-J's
# 65,536-entry command buffer overflowed; `ferry perftest` now grants subscriber credit a
# window at a time (see crates/tools/src/perftest/credit.rs), so no cap is needed.
other_max_count=${BENCH_OTHER_MAX_COUNT:-0}
# Longest a perftest run may take; a run sized to $perf_secs takes a few seconds, so this only
# cuts off a hung run (Broker-J with several subscribers on a queue sometimes never finishes).
perf_timeout=${BENCH_PERF_TIMEOUT:-30}

started_at=$(date +%s)
mkdir -p "$out/raw"
rm -f "$out"/*.csv "$out"/*.png "$out"/commands.txt "$out"/BENCHMARKS.md "$out"/raw/*

# ---------------------------------------------------------------- servers and cleanup
ferryd_pid=
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
cleanup() {
    stop_pid "$ferryd_pid" 10
    stop_pid "$brokerj_pid" 30
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

start_ferryd() {
    # setsid: its own process group, so stop_pid reaches everything it started.
    # Authentication on, as shipped; a users file that does not exist leaves the built-in
    # guest/guest, whatever the invoking user's own users file holds.
    setsid "$ferryd" --port 0 --interface 127.0.0.1 --users-file "$out/raw/no-such-users-file" \
        >"$out/raw/ferryd.stdout" 2>"$out/raw/ferryd.log" &
    ferryd_pid=$!
    if ! wait_for_line "$out/raw/ferryd.stdout" '^[0-9]' 20 "$ferryd_pid"; then
        echo "ferryd did not start; see $out/raw/ferryd.log" >&2
        exit 1
    fi
    ferryd_port=$(head -n 1 "$out/raw/ferryd.stdout")
    echo "ferryd pid $ferryd_pid on 127.0.0.1:$ferryd_port"
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

# Messages for a netbench throughput run: at most 200k, and at most 512 MiB in all.
throughput_count() {
    local by_bytes=$(( 512 * 1024 * 1024 / $1 ))
    echo $(( by_bytes < 200000 ? by_bytes : 200000 ))
}

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
                --count "$(throughput_count "$s")" --batch "$batch" --time-limit 3 --csv
        done
    done
}

netbench_relay() {
    echo "netbench relay (producer -> relay -> consumer)"
    local batch s
    for batch in 1 64; do
        for s in "${sizes[@]}"; do
            append_csv "$out/throughput.csv" "$ferry" netbench relay --size "$s" \
                --count "$(throughput_count "$s")" --batch "$batch" --time-limit 3 --csv
        done
    done
    # One-way latency through the relay at the papers' 10k msg/s; the stamp needs 16 bytes.
    for s in "${sizes[@]}"; do
        (( s >= 16 )) || continue
        append_csv "$out/latency.csv" "$ferry" netbench relay --latency --rate 10000 \
            --size "$s" --count 20000 --time-limit 5 --tcp-nodelay --csv
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

# One `ferry perftest -s` run; prints "pubs subs transfers mbytes" (tab-separated) or fails.
perftest_once() {   # size npubs nsubs qt count rawfile
    local size=$1 n=$2 qt=$4 count=$5 raw=$6
    local cmd=("$ferry" perftest -b "$b_host" -p "$b_port" "${b_auth[@]}" -s --size "$size"
        --npubs "$n" --nsubs "$3" --qt "$qt" --count "$count"
        --base-name "bench-$$-$RANDOM")
    log_cmd "${cmd[@]}"
    # bash's `time` reports the CPU time of the harness process (user, sys) into $raw.cpu.
    local TIMEFORMAT='%U %S' rc=0
    { time timeout -k 5 "$perf_timeout" "${cmd[@]}" >"$raw" 2>&1 || rc=$?; } 2>"$raw.cpu"
    if (( rc != 0 )); then
        echo "  perftest failed ($b_label size $size npubs $n qt $qt count $count): $(tail -n 1 "$raw" || true)" >&2
        return 1
    fi
    awk -F '\t' 'NF == 4 { line = $0 } END { if (line == "") exit 1; print line }' "$raw"
}

# Messages per publisher so that a run takes about $perf_secs: from the pilot's
# transfers/s (measured by the harness from "start" to the last report).
count_for() {   # transfers_per_sec size npubs qt
    awk -v r="$1" -v size="$2" -v n="$3" -v qt="$4" -v secs="$perf_secs" -v max="$b_max" 'BEGIN {
        per_msg = 2 * n * qt;                 # each message: one publish, one delivery
        c = r * secs / per_msg;
        bytes_cap = 2 * 1024 * 1024 * 1024 / size / (n * qt);   # 2 GiB per run at most
        if (c > bytes_cap) c = bytes_cap;
        if (c > 2000000) c = 2000000;
        if (max > 0 && c > max) c = max;
        if (c < 2000) c = 2000;
        printf "%d", c }'
}

perftest_point() {   # size npubs qt repeats
    local size=$1 n=$2 qt=$3 reps=$4 pilot line count rep t0 t1 c0 c1 secs cpu
    # Pilot: a small run that sizes the real ones and warms the broker (a JVM's JIT too).
    pilot=$(( 64 * 1024 * 1024 / size / (n * qt) ))
    (( pilot > 20000 )) && pilot=20000
    (( pilot < 1000 )) && pilot=1000
    if ! line=$(perftest_once "$size" "$n" "$n" "$qt" "$pilot" "$out/raw/perftest-$b_label-$size-$n-$qt-pilot.txt"); then
        echo "$b_label,$size,$n,$n,$qt,$pilot,pilot,,,,,,,,,failed" >>"$out/perftest.csv"
        return 0
    fi
    count=$(count_for "$(cut -f3 <<<"$line")" "$size" "$n" "$qt")
    for (( rep = 1; rep <= reps; rep++ )); do
        c0=$(cpu_sample "$b_pid"); t0=$(now)
        if line=$(perftest_once "$size" "$n" "$n" "$qt" "$count" "$out/raw/perftest-$b_label-$size-$n-$qt-$rep.txt"); then
            t1=$(now); c1=$(cpu_sample "$b_pid"); secs=$(elapsed "$t0" "$t1")
            cpu=$(cpu_delta "$c0" "$c1" "$secs")
            cpu+=,$(awk -v secs="$secs" '{ printf "%.2f", ($1 + $2) / secs }' "$out/raw/perftest-$b_label-$size-$n-$qt-$rep.txt.cpu")
            awk -F '\t' -v pre="$b_label,$size,$n,$n,$qt,$count,$rep" -v post="$secs,$cpu" \
                '{ printf "%s,%s,%s,%s,%s,%s,ok\n", pre, $1, $2, $3, $4, post }' <<<"$line" >>"$out/perftest.csv"
        else
            echo "$b_label,$size,$n,$n,$qt,$count,$rep,,,,,,,,,failed" >>"$out/perftest.csv"
        fi
    done
    printf '  %-8s %6s B  npubs=nsubs=%s qt=%s  count %-8s %s transfers/s\n' \
        "$b_label" "$size" "$n" "$qt" "$count" "$(cut -f3 <<<"$line")"
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
broker_latency() {
    echo "latency-test against $b_label: --rate 10000 --tcp-nodelay, ${lat_secs}s per size"
    local s raw cmd sent achieved corr act c0 c1 t0 t1 secs cpu
    # A short unrecorded run first, so the first size does not pay for warm-up.
    timeout -k 5 30 "$ferry" latency-test -b "$b_host" -p "$b_port" "${b_auth[@]}" --rate 10000 \
        --tcp-nodelay --size 256 --time-limit 2 >/dev/null 2>&1 || true
    for s in "${sizes[@]}"; do
        raw=$out/raw/latency-$b_label-$s.txt
        cmd=("$ferry" latency-test -b "$b_host" -p "$b_port" "${b_auth[@]}" --rate 10000 --tcp-nodelay
            --size "$s" --time-limit "$lat_secs")
        log_cmd "${cmd[@]}"
        c0=$(cpu_sample "$b_pid"); t0=$(now)
        if ! timeout -k 5 $(( lat_secs + 30 )) "${cmd[@]}" >"$raw" 2>&1; then
            # Retried once: the harness's receiver sometimes sees its subscription end
            # ("the latency subscription ended") with either broker; the failure is kept.
            echo "  latency-test failed ($b_label size $s): $(tail -n 1 "$raw" || true); retrying once" >&2
            mv "$raw" "$raw.failed"
            echo "$b_label,$s,10000,$lat_secs,,,corrected,,,,,,,,,,failed" >>"$out/latency_test.csv"
            log_cmd "${cmd[@]}"
            c0=$(cpu_sample "$b_pid"); t0=$(now)
            if ! timeout -k 5 $(( lat_secs + 30 )) "${cmd[@]}" >"$raw" 2>&1; then
                echo "  latency-test failed again ($b_label size $s): $(tail -n 1 "$raw" || true)" >&2
                echo "$b_label,$s,10000,$lat_secs,,,corrected,,,,,,,,,,failed" >>"$out/latency_test.csv"
                continue
            fi
        fi
        t1=$(now); c1=$(cpu_sample "$b_pid"); secs=$(elapsed "$t0" "$t1")
        cpu=$(cpu_delta "$c0" "$c1" "$secs")
        read -r sent achieved < <(sed -n -E 's/^Sent ([0-9]+) msgs in [0-9]+ms \(([0-9]+) msgs\/s\).*/\1 \2/p' "$raw")
        # "min=a avg=b ..." -> "a,b,..." (min,avg,max,p50,p90,p99,p99.9)
        corr=$(grep '^Latency(ms) over' "$raw" | sed -E 's/.*samples: //; s/[a-z0-9.]+=//g; s/ +/,/g')
        act=$(grep 'from actual send time' "$raw" | sed -E 's/.*omission: //; s/\)$//; s/[a-z0-9.]+=//g; s/ +/,/g')
        echo "$b_label,$s,10000,$lat_secs,$sent,$achieved,corrected,$corr,$cpu,ok" >>"$out/latency_test.csv"
        echo "$b_label,$s,10000,$lat_secs,$sent,$achieved,actual,$act,$cpu,ok" >>"$out/latency_test.csv"
        printf '  %-8s %6s B  avg %s ms  p99 %s ms (corrected)\n' "$b_label" "$s" \
            "$(cut -d, -f2 <<<"$corr")" "$(cut -d, -f6 <<<"$corr")"
    done
}

measure_broker() {
    broker_perftest
    broker_latency
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
    meta invocation "bench/run.sh $*"
    meta quick "${BENCH_QUICK:-0}"
    meta perf_secs "$perf_secs"
    meta perf_repeats "$perf_repeats"
    meta lat_secs "$lat_secs"
    meta other_max_count "$other_max_count"
    meta ferryd_options "--port 0 --interface 127.0.0.1 (defaults otherwise: worker threads = CPUs, tcp-nodelay yes)"
    if (( brokerj )); then
        meta brokerj_version "Apache Qpid Broker-J $(sed -n -E 's/.*<brokerj.version>(.*)<\/brokerj.version>.*/\1/p' "$root/interop/brokerj/pom.xml" | head -n 1), in-memory virtual host"
        meta java_version "$(java -version 2>&1 | head -n 1)"
        meta brokerj_java_opts "${BROKERJ_JAVA_OPTS:--Xmx2g}"
    fi
}

# ---------------------------------------------------------------- the run
cargo build --release -p ferry-tools -p ferryd --manifest-path "$root/Cargo.toml"
bin=${CARGO_TARGET_DIR:-$root/target}/release
ferry=$bin/ferry
ferryd=$bin/ferryd
write_meta "$@"

echo "broker,size,npubs,nsubs,qt,count,rep,pubs_per_sec,subs_per_sec,transfers_per_sec,mbytes_per_sec,wall_secs,machine_cpu_busy_pct,broker_cpu_cores,harness_cpu_cores,status" >"$out/perftest.csv"
echo "broker,size,rate,time_limit,sent,achieved_rate,view,min_ms,avg_ms,max_ms,p50_ms,p90_ms,p99_ms,p999_ms,machine_cpu_busy_pct,broker_cpu_cores,status" >"$out/latency_test.csv"

# Baselines first, with no broker running, so nothing competes for the two CPUs.
netbench_pingpong
netbench_stream
netbench_relay

start_ferryd
set_broker ferryd 127.0.0.1 "$ferryd_port" "$ferryd_pid" 0 --username guest --password guest
measure_broker
stop_pid "$ferryd_pid" 10; ferryd_pid=

if (( brokerj )); then
    start_brokerj
    set_broker brokerj 127.0.0.1 "$brokerj_port" "$brokerj_pid" "$other_max_count" \
        --username guest --password guest
    measure_broker
    stop_pid "$brokerj_pid" 30; brokerj_pid=
fi
if [[ -n $other ]]; then
    set_broker "${BENCH_OTHER_LABEL:-other}" "${other%:*}" "${other##*:}" "" "$other_max_count" \
        --username "${BENCH_OTHER_USER:-guest}" --password "${BENCH_OTHER_PASSWORD:-guest}"
    measure_broker
fi

meta duration_secs "$(( $(date +%s) - started_at ))"

# ---------------------------------------------------------------- charts and report
venv=$here/.venv
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -c 'import matplotlib' 2>/dev/null ||
    "$venv/bin/pip" install --quiet 'matplotlib>=3.7'
"$venv/bin/python" "$here/plot.py" "$out"
"$venv/bin/python" "$here/report.py" "$out" "$out/BENCHMARKS.md"
if (( publish )); then
    mkdir -p "$results"
    rm -f "$results"/*.csv "$results"/*.png "$results"/commands.txt
    cp "$out"/*.csv "$out"/*.png "$out"/commands.txt "$results"/
    "$venv/bin/python" "$here/report.py" "$results" "$root/BENCHMARKS.md"
    echo "published: bench/results/ and BENCHMARKS.md"
fi
echo "results in $out ($(( $(date +%s) - started_at ))s)"
