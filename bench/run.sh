#!/usr/bin/env bash
# Ferry benchmarks: the loopback baselines now, broker rows as the client lands.
#
#   bench/run.sh [OTHER_HOST:PORT]
#
# Builds the release `ferry`, runs each measurement over the papers' message sizes, writes
# CSV under bench/out/ (or $BENCH_OUT) and draws PNG charts from it with bench/plot.py.
# OTHER_HOST:PORT is a second broker (e.g. qpidd) measured with the same harnesses.
# Every run is bounded by a message count and a --time-limit; the whole script takes a few
# minutes. Set BENCH_QUICK=1 for a smoke run over three sizes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${BENCH_OUT:-$here/out}
other=${1:-}
sizes=(8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768)
if [[ ${BENCH_QUICK:-0} == 1 ]]; then sizes=(8 256 32768); fi

mkdir -p "$out"
cargo build --release -p ferry-tools --manifest-path "$root/Cargo.toml"
ferry="${CARGO_TARGET_DIR:-$root/target}/release/ferry"

# Runs a `ferry ... --csv` command and appends its row to a CSV file, writing the header
# only into an empty file.
append_csv() {
    local file=$1; shift
    local rows
    rows=$("$@")
    if [[ -s $file ]]; then
        tail -n +2 <<<"$rows" >>"$file"
    else
        printf '%s\n' "$rows" >"$file"
    fi
}

# Messages for a throughput run: at most 200k, and at most 512 MiB in all.
throughput_count() {
    local size=$1 by_bytes=$(( 512 * 1024 * 1024 / $1 ))
    echo $(( by_bytes < 200000 ? by_bytes : 200000 ))
}

netbench_pingpong() {
    echo "netbench pingpong (round trips, back-to-back)"
    for s in "${sizes[@]}"; do
        append_csv "$out/latency.csv" "$ferry" netbench pingpong --size "$s" \
            --count 5000 --warmup 500 --time-limit 5 --tcp-nodelay --csv
    done
}

netbench_stream() {
    echo "netbench stream (one-way throughput, 1 and 64 messages per write)"
    for batch in 1 64; do
        for s in "${sizes[@]}"; do
            append_csv "$out/throughput.csv" "$ferry" netbench stream --size "$s" \
                --count "$(throughput_count "$s")" --batch "$batch" --time-limit 3 --csv
        done
    done
}

netbench_relay() {
    echo "netbench relay (producer -> relay -> consumer)"
    for batch in 1 64; do
        for s in "${sizes[@]}"; do
            append_csv "$out/throughput.csv" "$ferry" netbench relay --size "$s" \
                --count "$(throughput_count "$s")" --batch "$batch" --time-limit 3 --csv
        done
    done
    # One-way latency at the papers' 10k msg/s; the stamp needs 16 bytes.
    for s in "${sizes[@]}"; do
        (( s >= 16 )) || continue
        append_csv "$out/latency.csv" "$ferry" netbench relay --latency --rate 10000 \
            --size "$s" --count 20000 --time-limit 5 --tcp-nodelay --csv
    done
}

# Broker rows: `ferry perftest -s` prints "pubs/sec subs/sec transfers/sec Mbytes/sec".
# Skipped, with the reason, while `ferry perftest` cannot run (no AMQP 0-10 client yet).
broker_perftest() {
    local label=$1 hostport=$2 host port line
    host=${hostport%:*}; port=${hostport##*:}
    echo "perftest against $label ($hostport)"
    for s in "${sizes[@]}"; do
        if ! line=$("$ferry" perftest -b "$host" -p "$port" -s --size "$s" \
                --count "$(( $(throughput_count "$s") / 2 ))" 2>&1 | tail -n 1); then
            echo "  skipped: $line"
            return 0
        fi
        [[ -s $out/perftest.csv ]] ||
            echo "broker,size,pubs_per_sec,subs_per_sec,transfers_per_sec,mbytes_per_sec" >"$out/perftest.csv"
        awk -v b="$label" -v s="$s" -F '\t' '{ printf "%s,%s,%s,%s,%s,%s\n", b, s, $1, $2, $3, $4 }' \
            <<<"$line" >>"$out/perftest.csv"
    done
}

plot() {
    local venv=$here/.venv
    if [[ ! -x $venv/bin/python ]]; then
        python3 -m venv "$venv"
    fi
    "$venv/bin/python" -c 'import matplotlib' 2>/dev/null ||
        "$venv/bin/pip" install --quiet 'matplotlib>=3.7'
    "$venv/bin/python" "$here/plot.py" "$out"
}

# Fresh files each run, so rows from different runs never mix.
rm -f "$out"/latency.csv "$out"/throughput.csv "$out"/perftest.csv
netbench_pingpong
netbench_stream
netbench_relay
if [[ -n ${FERRY_BROKER:-} ]]; then broker_perftest ferry "$FERRY_BROKER"; fi
if [[ -n $other ]]; then broker_perftest other "$other"; fi
plot
echo "results in $out"
