# Sourced by the interop suites' run.sh: starts ferryd on a free loopback port (or uses
# FERRY_PORT), stops it on exit, and shows its log when a suite fails.
#
#   source "$(dirname "$0")/../lib/ferryd.sh"
#   ferryd_start "${1:-}"          # sets $port (and $ferryd_pid when it started one)
#   ...run the suite...; status=$?
#   ferryd_finish $status          # prints the log tail on failure, exits with $status
#
# FERRYD_BINARY defaults to target/debug/ferryd under the repo root; nothing is built here.
# ferryd runs with lib/ferryd.acl (allow all but what the access-control tests expect to be
# refused); FERRY_ACL_FILE names another file, or none when empty.

set -uo pipefail

_ferry_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$_ferry_lib/../.." && pwd)
startup_timeout=${FERRY_STARTUP_TIMEOUT:-30}
workdir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-interop.XXXXXX")
ferryd_pid=""
port=""

ferryd_stop() {
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
trap ferryd_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ferryd_log_tail() {
    [ -n "$ferryd_pid" ] || return 0
    echo "---- ferryd stderr (tail) ----" >&2
    tail -n 100 "$workdir/ferryd.err" >&2
}

ferryd_start() {
    if [ -n "${FERRY_PORT:-}" ]; then
        port=$FERRY_PORT
        return 0
    fi
    local ferryd=${1:-$repo_root/target/debug/ferryd}
    if [ ! -x "$ferryd" ]; then
        echo "run.sh: no ferryd binary at $ferryd (build it first: cargo build -p ferryd)" >&2
        exit 2
    fi
    : >"$workdir/ferryd.out"
    # Every suite runs under the suite ACL (FERRY_ACL_FILE= turns it off).
    local acl=()
    local acl_file=${FERRY_ACL_FILE-$_ferry_lib/ferryd.acl}
    [ -n "$acl_file" ] && acl=(--acl-file "$acl_file")
    "$ferryd" --port 0 --interface 127.0.0.1 --auth no "${acl[@]}" \
        >"$workdir/ferryd.out" 2>"$workdir/ferryd.err" </dev/null &
    ferryd_pid=$!
    # ferryd prints the bound port alone on its first stdout line (as qpidd does for
    # --port 0). Only a complete, newline-terminated line counts.
    local deadline=$((SECONDS + startup_timeout))
    while [ $SECONDS -lt $deadline ]; do
        if [ "$(wc -l <"$workdir/ferryd.out")" -ge 1 ]; then
            port=$(head -n 1 "$workdir/ferryd.out" | tr -d '\r\n ')
            break
        fi
        if ! kill -0 "$ferryd_pid" 2>/dev/null; then
            echo "run.sh: ferryd exited before printing its port" >&2
            ferryd_log_tail
            exit 1
        fi
        sleep 0.1
    done
    if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        echo "run.sh: no port from ferryd within ${startup_timeout}s (first line: '${port}')" >&2
        ferryd_log_tail
        exit 1
    fi
    echo "run.sh: ferryd (pid $ferryd_pid) listening on 127.0.0.1:$port"
}

ferryd_finish() {
    local status=$1
    [ "$status" -ne 0 ] && ferryd_log_tail
    exit "$status"
}

# A pytest suite in its own venv (requirements.txt beside it). pytest's exit 5 (no tests
# collected) is a failure: a suite that tests nothing has failed.
run_pytest_suite() {
    local here=$1 import_check=$2
    local venv=$here/.venv
    if [ ! -x "$venv/bin/pytest" ] || ! "$venv/bin/python" -c "$import_check" 2>/dev/null; then
        python3 -m venv "$venv" || { echo "run.sh: cannot create $venv" >&2; exit 2; }
        "$venv/bin/pip" install -q -r "$here/requirements.txt" || {
            echo "run.sh: pip install failed" >&2
            exit 2
        }
    fi
    (cd "$here" && FERRY_PORT=$port "$venv/bin/pytest" -q -p no:cacheprovider ${PYTEST_ARGS:-} .)
    local status=$?
    [ $status -eq 5 ] && echo "run.sh: no tests ran" >&2
    return $status
}

# A Maven/JUnit suite; .mvn/maven.config in the suite keeps Surefire's "Tests run" lines.
run_maven_suite() {
    local here=$1
    # shellcheck disable=SC2086
    (cd "$here" && mvn -B -q test -Dferry.host=127.0.0.1 -Dferry.port="$port" ${MVN_ARGS:-})
}
