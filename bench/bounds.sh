# What bounds the 1 pub / 1 sub / 1 queue rate at 256 B: per message, the CPU time, system
# calls and context switches of ferryd and of the harness process (publisher, subscriber and
# controller threads together), counted by `perf stat` (software events and the raw syscall
# tracepoint, which work where hardware counters do not), and the instructions each executes
# per message under callgrind (the difference of a long and a short run, so start-up, login
# and queue set-up drop out). Sourced by bench/run.sh; needs its helpers and a running
# ferryd (set_broker).

bounds_header="who,metric,per_msg,messages,rep,status"
bounds_size=256

bounds_perf_ok() {
    command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1
}

# One perftest with `perf stat` on the broker (attached) and on the harness (its command).
bounds_perf_once() {   # count rep
    local count=$1 rep=$2 ev=task-clock,context-switches,raw_syscalls:sys_enter
    local broker_stat=$out/raw/bounds-ferryd-$rep.txt harness_stat=$out/raw/bounds-harness-$rep.txt
    local raw=$out/raw/bounds-perftest-$rep.txt perf_pid line
    perf stat -x, -e "$ev" -p "$b_pid" -o "$broker_stat" &
    perf_pid=$!
    sleep 0.2
    local cmd=("$ferry" perftest -b "$b_host" -p "$b_port" "${b_auth[@]}" -s --size "$bounds_size"
        --count "$count" --base-name "bounds-$$-$rep")
    log_cmd perf stat -x, -e "$ev" -- "${cmd[@]}"
    if ! timeout -k 5 "$perf_timeout" perf stat -x, -e "$ev" -o "$harness_stat" -- "${cmd[@]}" >"$raw" 2>&1; then
        kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null || true
        echo "run,transfers_per_sec,,$count,$rep,failed" >>"$out/bounds.csv"
        return 0
    fi
    kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null || true
    line=$(tail -n 1 "$raw")
    echo "run,transfers_per_sec,$(cut -f3 <<<"$line"),$count,$rep,ok" >>"$out/bounds.csv"
    local who file
    for who in ferryd harness; do
        file=$broker_stat
        [[ $who == harness ]] && file=$harness_stat
        # -x, lines: value,unit,event,... ; task-clock is in msec.
        awk -F, -v who="$who" -v n="$count" -v rep="$rep" '
            $3 == "task-clock" { printf "%s,cpu_us,%.4f,%d,%d,ok\n", who, $1 * 1000 / n, n, rep }
            $3 == "context-switches" { printf "%s,context_switches,%.4f,%d,%d,ok\n", who, $1 / n, n, rep }
            $3 == "raw_syscalls:sys_enter" { printf "%s,syscalls,%.4f,%d,%d,ok\n", who, $1 / n, n, rep }
        ' "$file" >>"$out/bounds.csv"
    done
}

# Instructions a process executes under callgrind ("Collected : N" on stderr).
bounds_collected() { sed -n -E 's/.*Collected : ([0-9]+).*/\1/p' "$1" | tail -n 1; }

# ferryd's instructions for `count` messages: a fresh ferryd under callgrind.
bounds_ferryd_instr() {   # count tag
    local count=$1 tag=$2 log=$out/raw/bounds-cg-ferryd-$2.log port pid
    setsid valgrind --tool=callgrind --callgrind-out-file=/dev/null "$ferryd" --port 0 \
        --interface 127.0.0.1 --no-data-dir --users-file "$out/raw/no-such-users-file" \
        >"$out/raw/bounds-cg-ferryd-$tag.stdout" 2>"$log" &
    pid=$!
    if ! wait_for_line "$out/raw/bounds-cg-ferryd-$tag.stdout" '^[0-9]' 60 "$pid"; then
        stop_pid "$pid" 10
        return 1
    fi
    port=$(head -n 1 "$out/raw/bounds-cg-ferryd-$tag.stdout")
    timeout -k 5 300 "$ferry" perftest -b 127.0.0.1 -p "$port" --username guest --password guest \
        -s --size "$bounds_size" --count "$count" >/dev/null 2>&1 || { stop_pid "$pid" 10; return 1; }
    kill -INT "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    bounds_collected "$log"
}

# The harness's instructions for `count` messages: `ferry perftest` under callgrind against
# the running ferryd.
bounds_harness_instr() {   # count tag
    local count=$1 tag=$2 log=$out/raw/bounds-cg-harness-$2.log
    timeout -k 5 300 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$ferry" perftest \
        -b "$b_host" -p "$b_port" "${b_auth[@]}" -s --size "$bounds_size" --count "$count" \
        --base-name "bounds-cg-$$-$tag" >/dev/null 2>"$log" || return 1
    bounds_collected "$log"
}

measure_bounds() {
    local csv=$out/bounds.csv rep count=${BENCH_BOUNDS_COUNT:-500000}
    [[ ${BENCH_QUICK:-0} == 1 ]] && count=${BENCH_BOUNDS_COUNT:-100000}
    echo "what bounds the 1/1/1 rate: perf stat on ferryd and on the harness ($bounds_size B, $count messages)"
    if bounds_perf_ok; then
        # A warm-up, as the papers section's pilot is.
        timeout -k 5 "$perf_timeout" "$ferry" perftest -b "$b_host" -p "$b_port" "${b_auth[@]}" -s \
            --size "$bounds_size" --count 20000 --base-name "bounds-$$-warm" >/dev/null 2>&1 || true
        for (( rep = 1; rep <= perf_repeats; rep++ )); do
            bounds_perf_once "$count" "$rep"
        done
    else
        echo "ferryd,cpu_us,,,,unavailable" >>"$csv"
        echo "  perf (with the raw_syscalls tracepoint) is not available: no CPU or syscall counts" >&2
    fi
    local short=20000 long=120000 a b who
    [[ ${BENCH_QUICK:-0} == 1 ]] && long=60000
    if ! command -v valgrind >/dev/null; then
        echo "ferryd,instructions,,,,unavailable" >>"$csv"
        echo "  valgrind is not installed: no instruction counts" >&2
        return 0
    fi
    echo "  instructions per message under callgrind ($long - $short messages)"
    for who in ferryd harness; do
        if a=$("bounds_${who}_instr" "$short" short) && b=$("bounds_${who}_instr" "$long" long) &&
            [[ -n $a && -n $b ]]; then
            echo "$who,instructions,$(( (b - a) / (long - short) )),$(( long - short )),1,ok" >>"$csv"
        else
            echo "$who,instructions,,,,failed" >>"$csv"
        fi
    done
}
