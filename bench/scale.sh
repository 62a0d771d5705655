# bench/run.sh's `scale` section (sourced): what many idle connections and queues cost
# ferryd, and whether one busy queue still runs at full speed while they exist.
#
# $scale_reps times, each against a fresh ferryd (--max-connections raised), after a
# full-size unrecorded warm-up run, the busy queue alone, then with the load, then alone again:
#   none  `ferry perftest -s --size 256 --count $scale_count` (1 pub / 1 sub / 1 queue) alone;
#   idle  the same perftest run
#         by `ferry scale` while it holds $scale_conns idle AMQP 0-10
#         connections (PLAIN login, one session each) and $scale_queues queues (each bound to
#         amq.direct; declared pipelined on 4 of the connections, then 200 more one at a
#         time); `ferry scale` reads ferryd's RSS before, with the connections and with the
#         queues, checks every session still answers, deletes the queues and closes;
# A fresh broker gets faster over its first few runs (measured: 1.13M -> 1.50M transfers/s
# over five alternating runs in one ferryd, 1.19M -> 1.46M over seven; why it keeps rising is
# not established), so a load measured before the only run without it looked 10% slower
# than it was; a run alone on each side of it cancels that trend.
# Rows: scale.csv (broker,load,rep,connections,queues,<perftest columns>) for the busy
# queue, scale_cpu.csv (broker,load,rep,cpu_us_per_msg) for ferryd's CPU per message in
# each such run, scale_load.csv (broker,rep,<ferry scale --csv columns>) for the load itself.

scale_header="broker,load,rep,connections,queues,size,npubs,nsubs,qt,count,transfers_per_sec,mbytes_per_sec,status"

scale_cpu_header="broker,load,rep,cpu_us_per_msg,status"

scale_perftest_cmd() {   # [count] -> the perftest command line in scale_pt
    scale_pt=("$ferry" perftest -b 127.0.0.1 -p "$b_port" "${b_auth[@]}" -s --size 256
        --count "${1:-$scale_count}" --base-name "bench-scale-$$-$RANDOM")
}

# Throughput alone is noisy here (runs of the same thing spread by +-20%), so each measured
# run also has ferryd's CPU time counted while it runs (`perf stat` attached, where it
# works): per message, it shows whether the load makes the busy queue's work dearer.
# Wraps scale_pt so; the counts go to $1.
scale_counted() {   # statfile
    bounds_perf_ok || return 0
    scale_pt=(bash -c 'perf stat -x, -e task-clock -p "$1" -o "$2" & p=$!; sleep 0.3; shift 2
        "$@"; rc=$?; kill -INT "$p"; wait "$p"; exit "$rc"' scale-counted "$ferryd_pid" "$1"
        "${scale_pt[@]}")
}

# Appends ferryd's CPU per message for one run from its perf stat file, if there is one.
scale_cpu_row() {   # load rep statfile
    [[ -s $3 ]] || return 0
    awk -F, -v pre="ferryd,$1,$2" -v n="$scale_count" '
        $3 == "task-clock" && $1 + 0 > 0 { printf "%s,%.4f,ok\n", pre, $1 * 1000 / n; found = 1 }
        END { if (!found) printf "%s,,failed\n", pre }' "$3" >>"$out/scale_cpu.csv"
}

# Appends one busy-queue row from a file holding perftest's tab-separated result line.
scale_row() {   # load rep connections queues rawfile
    local line
    if line=$(awk -F '\t' 'NF == 4 { l = $0 } END { if (l == "") exit 1; print l }' "$5"); then
        awk -F '\t' -v pre="ferryd,$1,$2,$3,$4,256,1,1,1,$scale_count" \
            '{ printf "%s,%s,%s,ok\n", pre, $3, $4 }' <<<"$line" >>"$out/scale.csv"
        printf '  %-5s rep %s  %s transfers/s\n' "$1" "$2" "$(cut -f3 <<<"$line")"
    else
        echo "ferryd,$1,$2,$3,$4,256,1,1,1,$scale_count,,,failed" >>"$out/scale.csv"
        echo "  perftest failed ($1, rep $2): $(tail -n 2 "$5" | tr '\n' ' ')" >&2
    fi
}

# One recorded run of the busy queue without the load.
scale_alone() {   # rep before|after
    local raw=$out/raw/scale-none-$1-$2.txt stat=$out/raw/scale-none-$1-$2.perf
    scale_perftest_cmd
    scale_counted "$stat"
    log_cmd "${scale_pt[@]}"
    timeout -k 5 "$perf_timeout" "${scale_pt[@]}" >"$raw" 2>&1 || true
    scale_row none "$1" 0 0 "$raw"
    scale_cpu_row none "$1" "$stat"
}

measure_scale() {
    echo "scale: $scale_conns idle connections and $scale_queues queues; 256 B perftest with and without them"
    meta scale_load_at_start "$(cut -d' ' -f1-3 /proc/loadavg)"
    local rep raw cmd rows stat
    for (( rep = 1; rep <= scale_reps; rep++ )); do
        # A fresh ferryd per pair of runs: memory freed by an earlier load or backlog stays
        # in the allocator and would be reused, hiding what the connections and queues cost.
        ferryd_extra=(--max-connections "$(( scale_conns + 100 ))")
        start_ferryd
        ferryd_extra=()
        set_broker ferryd 127.0.0.1 "$ferryd_port" "$ferryd_pid" 0 --username guest --password guest
        # An unrecorded run, so no measured run is the broker's first.
        scale_perftest_cmd
        timeout -k 5 "$perf_timeout" "${scale_pt[@]}" >/dev/null 2>&1 || true
        scale_alone "$rep" before

        raw=$out/raw/scale-idle-$rep.txt
        stat=$out/raw/scale-idle-$rep.perf
        scale_perftest_cmd
        scale_counted "$stat"
        cmd=("$ferry" scale -b 127.0.0.1 -p "$b_port" "${b_auth[@]}" --connections "$scale_conns"
            --queues "$scale_queues" --broker-pid "$ferryd_pid" --step-timeout 60
            --command-timeout "$perf_timeout" --csv -- "${scale_pt[@]}")
        log_cmd "${cmd[@]}"
        # Its stdout is the CSV row; the perftest's output and its progress go to stderr.
        if rows=$(timeout -k 5 "$scale_timeout" "${cmd[@]}" 2>"$raw"); then
            if [[ -s $out/scale_load.csv ]]; then
                tail -n +2 <<<"$rows" | sed "s/^/ferryd,$rep,/" >>"$out/scale_load.csv"
            else
                { echo "broker,rep,$(head -n 1 <<<"$rows")"
                  tail -n +2 <<<"$rows" | sed "s/^/ferryd,$rep,/"; } >"$out/scale_load.csv"
            fi
            scale_row idle "$rep" "$scale_conns" "$scale_queues" "$raw"
            scale_cpu_row idle "$rep" "$stat"
        else
            echo "  ferry scale failed (rep $rep): $(tail -n 2 "$raw" | tr '\n' ' ')" >&2
            echo "ferryd,idle,$rep,$scale_conns,$scale_queues,256,1,1,1,$scale_count,,,failed" >>"$out/scale.csv"
        fi

        scale_alone "$rep" after
        stop_pid "$ferryd_pid" 10; ferryd_pid=
    done
    meta scale_load_at_end "$(cut -d' ' -f1-3 /proc/loadavg)"
}
