#!/usr/bin/env bash
# Run the RabbitMQ Java client (AMQP 0-9-1) interop suite against ferryd.
#
#   interop/rabbitmq-java/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/rabbitmq-java/run.sh        test a broker already on 127.0.0.1:N
#
# FERRYD_BINARY defaults to target/debug/ferryd under the repo root; this
# script builds nothing in Rust. Extra Maven arguments can be passed in
# MVN_ARGS (e.g. MVN_ARGS=-Dtest=WorkQueueTest). Exit status is Maven's.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
startup_timeout=${FERRY_STARTUP_TIMEOUT:-30}

workdir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-rabbitmq-java.XXXXXX")
ferryd_pid=""

cleanup() {
    if [ -n "$ferryd_pid" ] && kill -0 "$ferryd_pid" 2>/dev/null; then
        kill -TERM "$ferryd_pid" 2>/dev/null
        # ferryd should exit promptly on SIGTERM; don't let a hang outlive us.
        for _ in $(seq 50); do
            kill -0 "$ferryd_pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$ferryd_pid" 2>/dev/null; then
            echo "run.sh: ferryd ignored SIGTERM for 5 s; killing it" >&2
            kill -KILL "$ferryd_pid" 2>/dev/null
        fi
        wait "$ferryd_pid" 2>/dev/null
    fi
    rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log_tail() {
    [ -n "$ferryd_pid" ] || return 0
    echo "---- ferryd stdout (tail) ----" >&2
    tail -n 50 "$workdir/ferryd.out" >&2
    echo "---- ferryd stderr (tail) ----" >&2
    tail -n 100 "$workdir/ferryd.err" >&2
}

if [ -n "${FERRY_PORT:-}" ]; then
    port=$FERRY_PORT
else
    ferryd=${1:-$repo_root/target/debug/ferryd}
    if [ ! -x "$ferryd" ]; then
        echo "run.sh: no ferryd binary at $ferryd (build it first: cargo build -p ferryd)" >&2
        exit 2
    fi
    "$ferryd" --port 0 --interface 127.0.0.1 --auth no \
        >"$workdir/ferryd.out" 2>"$workdir/ferryd.err" </dev/null &
    ferryd_pid=$!

    # ferryd prints the bound port alone on its first stdout line (as qpidd
    # does for --port 0). Only a complete, newline-terminated line counts.
    port=""
    deadline=$((SECONDS + startup_timeout))
    while [ $SECONDS -lt $deadline ]; do
        if [ "$(wc -l <"$workdir/ferryd.out")" -ge 1 ]; then
            port=$(head -n 1 "$workdir/ferryd.out" | tr -d '\r\n ')
            break
        fi
        if ! kill -0 "$ferryd_pid" 2>/dev/null; then
            echo "run.sh: ferryd exited before printing its port" >&2
            log_tail
            exit 1
        fi
        sleep 0.1
    done
    if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        echo "run.sh: no port from ferryd within ${startup_timeout}s (first line: '${port}')" >&2
        log_tail
        exit 1
    fi
    echo "run.sh: ferryd (pid $ferryd_pid) listening on 127.0.0.1:$port"
fi

cd "$here"
# -q hides Maven's own chatter; .mvn/maven.config keeps Surefire's
# "Tests run: ..." lines at INFO so the summary still shows.
# shellcheck disable=SC2086
mvn -B -q test -Dferry.host=127.0.0.1 -Dferry.port="$port" ${MVN_ARGS:-}
status=$?
if [ $status -ne 0 ]; then
    log_tail
fi
exit $status
