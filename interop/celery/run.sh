#!/usr/bin/env bash
# Run the Celery (AMQP 0-9-1, py-amqp via kombu) interop suite against ferryd.
#
#   interop/celery/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/celery/run.sh        test a broker already on 127.0.0.1:N
#
# Creates interop/celery/.venv with celery and pytest from PyPI on first use. Extra pytest
# arguments go in PYTEST_ARGS. Exits non-zero on any failure, including "no tests ran".
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
startup_timeout=${FERRY_STARTUP_TIMEOUT:-30}
workdir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-celery.XXXXXX")
ferryd_pid=""

cleanup() {
    if [ -n "$ferryd_pid" ] && kill -0 "$ferryd_pid" 2>/dev/null; then
        kill -TERM "$ferryd_pid" 2>/dev/null
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
    echo "---- ferryd stderr (tail) ----" >&2
    tail -n 100 "$workdir/ferryd.err" >&2
}

venv=$here/.venv
if [ ! -x "$venv/bin/pytest" ] || ! "$venv/bin/python" -c "import celery, pytest" 2>/dev/null; then
    python3 -m venv "$venv" || { echo "run.sh: cannot create $venv" >&2; exit 2; }
    "$venv/bin/pip" install -q -r "$here/requirements.txt" || {
        echo "run.sh: pip install failed" >&2
        exit 2
    }
fi

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
    if ! [[ "$port" =~ ^[0-9]+$ ]]; then
        echo "run.sh: no port from ferryd within ${startup_timeout}s" >&2
        log_tail
        exit 1
    fi
    echo "run.sh: ferryd (pid $ferryd_pid) listening on 127.0.0.1:$port"
fi

cd "$here"
# shellcheck disable=SC2086
FERRY_PORT=$port "$venv/bin/pytest" -q -p no:cacheprovider ${PYTEST_ARGS:-} .
status=$?
# pytest exits 5 when it collected no tests: a suite that tests nothing has failed.
if [ $status -ne 0 ]; then
    log_tail
    [ $status -eq 5 ] && echo "run.sh: no tests ran" >&2
fi
exit $status
