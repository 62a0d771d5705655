# Sourced by the interop suites' run.sh: starts ferryd on a free loopback port (or uses
# FERRY_PORT), stops it on exit, and shows its log when a suite fails.
#
#   source "$(dirname "$0")/../lib/ferryd.sh"
#   ferryd_start "${1:-}"          # sets $port (and $ferryd_pid when it started one)
#   ...run the suite...; status=$?
#   ferryd_finish $status          # prints the log tail on failure, exits with $status
#   fetch_sdist "$here" URL SHA256 # a suite's source archive, checked, unpacked in $workdir
#
# FERRYD_BINARY defaults to target/debug/ferryd under the repo root; nothing is built here.
# With FERRY_MGMT=1, ferryd also serves management (--mgmt-enable yes --mgmt-port 0) and
# $FERRY_MGMT_PORT is its HTTP port (with FERRY_PORT, give FERRY_MGMT_PORT too).
# ferryd runs with lib/ferryd.acl (allow all but what the access-control tests expect to be
# refused); FERRY_ACL_FILE names another file, or none when empty. FERRYD_ARGS adds options
# (split at spaces), e.g. FERRYD_ARGS="--mgmt-enable yes".

set -uo pipefail

_ferry_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$_ferry_lib/../.." && pwd)
startup_timeout=${FERRY_STARTUP_TIMEOUT:-30}
workdir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-interop.XXXXXX")
ferryd_pid=""
port=""
secure_pid=""
plain_only_pid=""

ferryd_stop() {
    _ferryd_stop_pid "$plain_only_pid"
    _ferryd_stop_pid "$secure_pid"
    _ferryd_stop_pid "$ferryd_pid"
    rm -rf "$workdir"
}

_ferryd_stop_pid() {
    local ferryd_pid=$1
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
}
trap ferryd_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ferryd_log_tail() {
    [ -n "$ferryd_pid" ] || return 0
    echo "---- ferryd stderr (tail) ----" >&2
    tail -n 100 "$workdir/ferryd.err" >&2
    if [ -n "$secure_pid" ]; then
        echo "---- secure ferryd stderr (tail) ----" >&2
        tail -n 60 "$workdir/secure.err" >&2
    fi
    if [ -n "$plain_only_pid" ]; then
        echo "---- plain-only ferryd stderr (tail) ----" >&2
        tail -n 30 "$workdir/plain-only.err" >&2
    fi
}

# Reads the first $2 lines of file $1 (ports) while process $3 lives; sets $lines.
_ferryd_wait_lines() {
    local file=$1 want=$2 pid=$3 deadline=$((SECONDS + startup_timeout))
    while [ $SECONDS -lt $deadline ]; do
        if [ "$(wc -l <"$file")" -ge "$want" ]; then
            lines=$(head -n "$want" "$file" | tr -d '\r ')
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# A second ferryd for the security tests: --auth yes with a users file made by `ferry user`,
# and a TLS listener whose CA, server and client certificates are generated here with the
# openssl CLI (nothing secret is kept in the repository). Exports:
#   FERRY_SECURE_PORT  plain port (auth required)      FERRY_TLS_PORT  TLS port
#   FERRY_USER / FERRY_PASSWORD  a user in the users file
#   FERRY_RABBIT_USER / FERRY_RABBIT_PASSWORD  a user with a RabbitMQ password hash
#   FERRY_TLS_DIR      ca.pem, client.pem + client.key (CN=interop-client), and for Java
#                      truststore.p12 / client.p12 (password: changeit)
# With FERRY_PORT set (a broker run elsewhere) nothing starts and FERRY_SECURE_PORT is empty,
# which the suites take as "skip the security tests".
ferryd_start_secure() {
    if [ -n "${FERRY_PORT:-}" ]; then
        export FERRY_SECURE_PORT="" FERRY_TLS_PORT=""
        return 0
    fi
    local ferryd=${1:-$repo_root/target/debug/ferryd}
    local ferry
    ferry=$(dirname "$ferryd")/ferry
    [ -x "$ferry" ] || { echo "run.sh: no ferry binary at $ferry" >&2; exit 2; }
    command -v openssl >/dev/null || { echo "run.sh: openssl is needed for the TLS tests" >&2; exit 2; }
    local tls=$workdir/tls
    mkdir -p "$tls"
    (
        set -e
        cd "$tls"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=Ferry interop CA" \
            -keyout ca.key -out ca.pem -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign"
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile server.ext -out server.pem
        openssl req -newkey rsa:2048 -nodes -subj "/CN=interop-client" -keyout client.key -out client.csr
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile client.ext -out client.pem
        if command -v keytool >/dev/null; then
            keytool -importcert -noprompt -alias ferry-ca -file ca.pem -keystore truststore.p12 \
                -storetype PKCS12 -storepass changeit
            openssl pkcs12 -export -in client.pem -inkey client.key -name client \
                -out client.p12 -passout pass:changeit
        fi
    ) >"$workdir/tls.log" 2>&1 || { echo "run.sh: making test certificates failed:" >&2; cat "$workdir/tls.log" >&2; exit 1; }
    export FERRY_USER=interop FERRY_PASSWORD=interop-secret-pw
    printf '%s\n' "$FERRY_PASSWORD" |
        "$ferry" user add "$FERRY_USER" --password-stdin --users-file "$workdir/users" 2>/dev/null ||
        { echo "run.sh: ferry user add failed" >&2; exit 1; }
    # A user as RabbitMQ's definitions carry one: its salted SHA-256 hash, not SCRAM keys
    # (the example in RabbitMQ's passwords guide, whose password is test12).
    export FERRY_RABBIT_USER=rabbitmq-user FERRY_RABBIT_PASSWORD=test12
    printf '%s:RABBIT-SHA-256$%s\n' "$FERRY_RABBIT_USER" \
        'kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR' >>"$workdir/users"
    # One rule for the suites' ACL tests: queues named acl-undeletable-* may not be deleted.
    printf 'acl deny all delete queue name=acl-undeletable-*\nacl allow all all\n' >"$workdir/acl"
    "$ferryd" --port 0 --interface 127.0.0.1 --auth yes --users-file "$workdir/users" --no-data-dir \
        --acl-file "$workdir/acl" --ssl-port 0 --ssl-cert-file "$tls/server.pem" --ssl-key-file "$tls/server.key" \
        --ssl-ca-file "$tls/ca.pem" \
        >"$workdir/secure.out" 2>"$workdir/secure.err" </dev/null &
    secure_pid=$!
    local lines
    if ! _ferryd_wait_lines "$workdir/secure.out" 2 "$secure_pid"; then
        echo "run.sh: the secure ferryd printed no ports" >&2
        tail -n 40 "$workdir/secure.err" >&2
        exit 1
    fi
    FERRY_SECURE_PORT=$(echo "$lines" | sed -n 1p)
    FERRY_TLS_PORT=$(echo "$lines" | sed -n 2p)
    export FERRY_SECURE_PORT FERRY_TLS_PORT FERRY_TLS_DIR=$tls
    echo "run.sh: secure ferryd (pid $secure_pid): auth on 127.0.0.1:$FERRY_SECURE_PORT, TLS on :$FERRY_TLS_PORT"
}

# A third ferryd, after ferryd_start_secure and with its users file, that offers only
# PLAIN and AMQPLAIN (--sasl-mechanisms): what an operator does so that clients which pick
# SCRAM-SHA-256 whenever offered log in as users with a RabbitMQ password hash. Exports
# FERRY_PLAIN_ONLY_PORT (empty when no secure ferryd was started here).
ferryd_start_plain_only() {
    if [ -z "$secure_pid" ]; then
        export FERRY_PLAIN_ONLY_PORT=""
        return 0
    fi
    local ferryd=${1:-$repo_root/target/debug/ferryd}
    "$ferryd" --port 0 --interface 127.0.0.1 --auth yes --users-file "$workdir/users" --no-data-dir \
        --sasl-mechanisms PLAIN,AMQPLAIN \
        >"$workdir/plain-only.out" 2>"$workdir/plain-only.err" </dev/null &
    plain_only_pid=$!
    local lines
    if ! _ferryd_wait_lines "$workdir/plain-only.out" 1 "$plain_only_pid"; then
        echo "run.sh: the plain-only ferryd printed no port" >&2
        tail -n 40 "$workdir/plain-only.err" >&2
        exit 1
    fi
    export FERRY_PLAIN_ONLY_PORT=$lines
    echo "run.sh: plain-only ferryd (pid $plain_only_pid): PLAIN and AMQPLAIN on 127.0.0.1:$FERRY_PLAIN_ONLY_PORT"
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
    # For suites that start brokers of their own (the cluster failover tests).
    export FERRYD_BIN=$(cd "$(dirname "$ferryd")" && pwd)/$(basename "$ferryd")
    : >"$workdir/ferryd.out"
    # Every suite runs under the suite ACL (FERRY_ACL_FILE= turns it off), memory-only:
    # suites run side by side and must not share (or lock) one data directory.
    local acl=()
    local acl_file=${FERRY_ACL_FILE-$_ferry_lib/ferryd.acl}
    [ -n "$acl_file" ] && acl=(--acl-file "$acl_file")
    local extra=()
    read -ra extra <<<"${FERRYD_ARGS:-}"
    local mgmt=() want=1
    [ -n "${FERRY_MGMT:-}" ] && mgmt=(--mgmt-enable yes --mgmt-port 0) && want=2
    "$ferryd" --port 0 --interface 127.0.0.1 --auth no --no-data-dir "${acl[@]}" "${mgmt[@]}" "${extra[@]}" \
        >"$workdir/ferryd.out" 2>"$workdir/ferryd.err" </dev/null &
    ferryd_pid=$!
    # ferryd prints the bound port alone on its first stdout line (as qpidd does for
    # --port 0), the management port on the next. Only complete lines count.
    local deadline=$((SECONDS + startup_timeout))
    while [ $SECONDS -lt $deadline ]; do
        if [ "$(wc -l <"$workdir/ferryd.out")" -ge "$want" ]; then
            port=$(head -n 1 "$workdir/ferryd.out" | tr -d '\r\n ')
            [ "$want" -eq 2 ] && export FERRY_MGMT_PORT=$(sed -n 2p "$workdir/ferryd.out" | tr -d '\r\n ')
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

# A source archive a suite's tests ship in: fetched once into SUITE_DIR/.sdist, checked
# against its SHA-256, and unpacked into the run's work directory.
#   fetch_sdist SUITE_DIR URL SHA256
fetch_sdist() {
    local here=$1 url=$2 sha256=$3
    local name=${url##*/}
    local file=$here/.sdist/$name
    command -v curl >/dev/null || { echo "run.sh: curl is needed" >&2; exit 2; }
    mkdir -p "$here/.sdist"
    if ! echo "$sha256  $file" | sha256sum -c --quiet >/dev/null 2>&1; then
        curl -fsSL --retry 3 -o "$file.part" "$url" && mv "$file.part" "$file" ||
            { echo "run.sh: downloading $name failed" >&2; exit 2; }
        echo "$sha256  $file" | sha256sum -c --quiet ||
            { echo "run.sh: $name does not match its SHA-256" >&2; rm -f "$file"; exit 2; }
    fi
    tar xzf "$file" -C "$workdir" || exit 2
}

# A pytest suite in its own venv (requirements.txt beside it), run in directory $3 (default:
# the suite's own) on $4 (default: all of it). pytest's exit 5 (no tests collected) is a
# failure: a suite that tests nothing has failed.
run_pytest_suite() {
    local here=$1 import_check=$2 dir=${3:-$1} target=${4:-.}
    local venv=$here/.venv
    if [ ! -x "$venv/bin/pytest" ] || ! "$venv/bin/python" -c "$import_check" 2>/dev/null; then
        python3 -m venv "$venv" || { echo "run.sh: cannot create $venv" >&2; exit 2; }
        "$venv/bin/pip" install -q -r "$here/requirements.txt" || {
            echo "run.sh: pip install failed" >&2
            exit 2
        }
    fi
    (cd "$dir" && FERRY_PORT=$port "$venv/bin/pytest" -q -p no:cacheprovider ${PYTEST_ARGS:-} "$target")
    local status=$?
    [ $status -eq 5 ] && echo "run.sh: no tests ran" >&2
    return $status
}

# A Maven/JUnit suite; .mvn/maven.config in the suite keeps Surefire's "Tests run" lines.
run_maven_suite() {
    local here=$1
    # shellcheck disable=SC2086
    (cd "$here" && mvn -B -q test -Dferry.host=127.0.0.1 -Dferry.port="$port" \
        -Dferry.securePort="${FERRY_SECURE_PORT-}" -Dferry.tlsPort="${FERRY_TLS_PORT-}" \
        -Dferry.tlsDir="${FERRY_TLS_DIR-}" -Dferry.user="${FERRY_USER-}" \
        -Dferry.password="${FERRY_PASSWORD-}" -Dferry.rabbitUser="${FERRY_RABBIT_USER-}" \
        -Dferry.rabbitPassword="${FERRY_RABBIT_PASSWORD-}" \
        -Dferry.plainOnlyPort="${FERRY_PLAIN_ONLY_PORT-}" ${MVN_ARGS:-})
}
