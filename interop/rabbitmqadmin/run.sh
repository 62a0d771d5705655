#!/usr/bin/env bash
# rabbitmqadmin v2 — RabbitMQ's own command-line client for its management HTTP API (a Rust
# program from crates.io) — against ferryd's management API.
#
#   interop/rabbitmqadmin/run.sh [FERRYD_BINARY]   start ferryd (with management), test, stop it
#
# Installs rabbitmqadmin into interop/rabbitmqadmin/.tool with `cargo install` on first use
# (about 10 minutes on two cores; later runs reuse it). Needs the `ferry` binary beside
# ferryd (for AMQP traffic: `ferry latency-test`) and curl. Prints "N passed, M failed" and
# exits non-zero on any failure.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)
version=2.35.0
tool=$here/.tool/bin/rabbitmqadmin

if ! "$tool" --version 2>/dev/null | grep -qF "$version"; then
    echo "run.sh: installing rabbitmqadmin $version into $here/.tool"
    cargo install rabbitmqadmin --version "$version" --locked --root "$here/.tool" --quiet || {
        echo "run.sh: cargo install rabbitmqadmin failed" >&2
        exit 2
    }
fi
command -v curl >/dev/null || { echo "run.sh: curl is needed" >&2; exit 2; }

# Logins checked, with no users file yet: the built-in guest (an administrator, as in
# RabbitMQ), so that users can be declared and deleted through the API.
FERRYD_ARGS="--auth yes --users-file $workdir/no-users-file ${FERRYD_ARGS:-}"
FERRY_MGMT=1 ferryd_start "${1:-}"
ferryd=${1:-$repo_root/target/debug/ferryd}
ferry=$(dirname "$ferryd")/ferry
[ -x "$ferry" ] || { echo "run.sh: no ferry binary at $ferry" >&2; exit 2; }
[ -n "${FERRY_MGMT_PORT:-}" ] || { echo "run.sh: ferryd printed no management port" >&2; exit 1; }
echo "run.sh: management on 127.0.0.1:$FERRY_MGMT_PORT"

rmq() {
    "$tool" --non-interactive -H 127.0.0.1 -P "$FERRY_MGMT_PORT" -u guest -p guest "$@" 2>&1
}

passed=0
failed=0
# check NAME COMMAND...: the command's success is the check's.
check() {
    local name=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "ok      $name"
    else
        failed=$((failed + 1))
        echo "FAILED  $name"
    fi
}
# has OUTPUT TEXT: OUTPUT contains TEXT.
has() { grep -qF -- "$2" <<<"$1" || { echo "  expected '$2' in:"; sed 's/^/    /' <<<"$1"; return 1; }; }
lacks() { ! grep -qF -- "$2" <<<"$1" || { echo "  did not expect '$2' in:"; sed 's/^/    /' <<<"$1"; return 1; }; }
fails() { ! "$@" >/dev/null 2>&1; }

out=$(rmq show overview)
check "show overview names the product" has "$out" "Ferry"

check "declare queue" rmq declare queue --name rmq-q --durable false --arguments '{"x-max-length": 1000}'
check "declare exchange" rmq declare exchange --name rmq-x --type topic --durable false
check "declare binding" rmq declare binding --source rmq-x --destination-type queue \
    --destination rmq-q --routing-key 'orders.#'
out=$(rmq list queues)
check "list queues shows the queue" has "$out" "rmq-q"
check "list queues shows its arguments" has "$out" "x-max-length"
out=$(rmq list exchanges)
check "list exchanges shows the exchange and the built-ins" has "$out" "rmq-x"
check "list exchanges shows amq.topic" has "$out" "amq.topic"
out=$(rmq list bindings)
check "list bindings shows the binding" has "$out" "orders.#"

out=$(rmq publish message -e rmq-x -k orders.new -m hello-ferry -p '{"content_type":"text/plain","delivery_mode":2}')
check "publish message is routed" has "$out" "routed"
check "an unroutable message is reported" fails bash -c \
    "'$tool' --non-interactive -H 127.0.0.1 -P $FERRY_MGMT_PORT -u guest -p guest publish message -e rmq-x -k nowhere -m x | grep -q 'routed successfully'"
out=$(rmq get messages -q rmq-q -c 1 -a ack_requeue_true)
check "get (requeue) returns the payload" has "$out" "hello-ferry"
check "get (requeue) returns the properties" has "$out" "text/plain"
out=$(rmq get messages -q rmq-q -c 1 -a ack_requeue_false)
check "get again sees it redelivered" has "$out" "true"
out=$(rmq get messages -q rmq-q -c 1 -a ack_requeue_false)
check "the acknowledged message is gone" lacks "$out" "hello-ferry"
rmq publish message -e rmq-x -k orders.a -m one >/dev/null
rmq publish message -e rmq-x -k orders.b -m two >/dev/null
check "purge queue" rmq purge queue --name rmq-q
out=$(rmq get messages -q rmq-q -c 5 -a ack_requeue_false)
check "the purged queue is empty" lacks "$out" "one"

defs=$workdir/definitions.json
check "definitions export" rmq definitions export --file "$defs"
check "the export holds the queue" grep -qF '"rmq-q"' "$defs"
check "the export holds the binding" grep -qF '"orders.#"' "$defs"
check "delete binding" rmq delete binding --source rmq-x --destination-type queue \
    --destination rmq-q --routing-key 'orders.#'
out=$(rmq list bindings)
check "the binding is gone" lacks "$out" "orders.#"
check "delete queue" rmq delete queue --name rmq-q
check "delete exchange" rmq delete exchange --name rmq-x
check "deleting a missing queue fails" fails rmq delete queue --name rmq-q
out=$(rmq list queues)
check "the queue is gone" lacks "$out" "rmq-q"
check "definitions import" rmq definitions import --file "$defs"
out=$(rmq list queues)
check "import brought the queue back" has "$out" "rmq-q"
out=$(rmq list bindings)
check "import brought the binding back" has "$out" "orders.#"

# lib/ferryd.acl denies creating queues named acl-denied*.
check "the ACL refuses a declare (403)" fails rmq declare queue --name acl-denied-rmq --durable false
out=$(rmq list queues)
check "the refused queue does not exist" lacks "$out" "acl-denied-rmq"

# rabbitmqadmin hashes a --password the RabbitMQ way on the client (salted SHA-256) and sends
# only the hash: ferryd keeps it, and the user logs in with that password (PLAIN, HTTP Basic).
check "declare user (a client-side RabbitMQ hash)" \
    rmq declare user --name rmq-user --password rmq-secret --tags monitoring
out=$(rmq list users)
check "list users shows the user" has "$out" "rmq-user"
check "list users shows its tag" has "$out" "monitoring"
check "the declared user logs in over HTTP" curl -sf -o /dev/null -u rmq-user:rmq-secret \
    "http://127.0.0.1:$FERRY_MGMT_PORT/api/whoami"
check "a wrong password is refused" fails curl -sf -o /dev/null -u rmq-user:rmq-secreT \
    "http://127.0.0.1:$FERRY_MGMT_PORT/api/whoami"
amqp_login() {
    "$ferry" perftest --protocol amqp0-9-1 -b 127.0.0.1 -p "$port" --username "$1" \
        --password "$2" --count 10 --base-name rmq-user-q >"$workdir/perftest.out" 2>&1 ||
        { sed 's/^/    /' "$workdir/perftest.out"; return 1; }
}
check "the declared user logs in over AMQP 0-9-1 and moves messages" amqp_login rmq-user rmq-secret
check "not with a wrong password" fails amqp_login rmq-user rmq-secreT
check "declare user (a SHA-512 hash, its algorithm unnamed)" \
    rmq declare user --name rmq-512 --password rmq-long --hashing-algorithm SHA512 --tags ""
out=$(curl -s -u guest:guest "http://127.0.0.1:$FERRY_MGMT_PORT/api/users/rmq-512")
check "kept as SHA-512" has "$out" "rabbit_password_hashing_sha512"
check "the SHA-512 user logs in over AMQP 0-9-1" amqp_login rmq-512 rmq-long
check "delete the SHA-512 user" rmq delete user --name rmq-512
# A record of ferryd's own (here guest's, so the new user's password is guest) copies a user
# through --password-hash.
record=$(curl -s -u guest:guest "http://127.0.0.1:$FERRY_MGMT_PORT/api/users/guest" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["password_hash"])')
check "declare user with a ferryd record" \
    rmq declare user --name rmq-copy --password-hash "$record" --tags ""
check "the copied user logs in" curl -sf -o /dev/null -u rmq-copy:guest \
    "http://127.0.0.1:$FERRY_MGMT_PORT/api/whoami"
out=$("$tool" --non-interactive -H 127.0.0.1 -P "$FERRY_MGMT_PORT" -u rmq-user -p rmq-secret \
    declare user --name rmq-other --password-hash "$record" --tags "" 2>&1)
check "a user without the administrator tag may not declare users" has "$out" "administrator tag"
check "delete user" rmq delete user --name rmq-user
check "delete the copy" rmq delete user --name rmq-copy
check "the deleted user cannot log in" fails curl -sf -o /dev/null -u rmq-user:rmq-secret \
    "http://127.0.0.1:$FERRY_MGMT_PORT/api/whoami"
out=$(rmq list users)
check "the deleted user is gone" lacks "$out" "rmq-user"

check "health check: local alarms" rmq health_check local_alarms
check "health check: port listener (management)" rmq health_check port_listener --port "$FERRY_MGMT_PORT"
check "health check: port listener (AMQP)" rmq health_check port_listener --port "$port"
check "health check: protocol listener amqp" rmq health_check protocol_listener --protocol amqp
check "health check: no stomp listener" fails rmq health_check protocol_listener --protocol stomp
out=$(rmq list nodes)
check "list nodes shows the node" has "$out" "ferry@"
out=$(rmq list vhosts)
check "list vhosts shows /" has "$out" "/"

# Live AMQP traffic: a 0-9-1 latency test holds connections and a consumer for a while.
"$ferry" latency-test --protocol amqp0-9-1 -b 127.0.0.1 -p "$port" --rate 50 --time-limit 30 \
    --username guest --password guest \
    >"$workdir/latency.out" 2>&1 &
latency_pid=$!
for _ in $(seq 100); do
    out=$(rmq list consumers)
    grep -q "latency" <<<"$out" && break
    sleep 0.1
done
out=$(rmq list connections)
check "list connections shows the 0-9-1 client" has "$out" "AMQP 0-9-1"
out=$(rmq list consumers)
check "list consumers shows its consumer" has "$out" "latency"
# Connections report their channels at most once a second.
for _ in $(seq 30); do
    out=$(rmq list channels)
    grep -q "running" <<<"$out" && break
    sleep 0.1
done
check "list channels shows its channels" has "$out" "running"
name=$(curl -s -u guest:guest "http://127.0.0.1:$FERRY_MGMT_PORT/api/connections" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["name"])')
check "close connection" rmq close connection --name "$name"
for _ in $(seq 50); do
    out=$(rmq list connections)
    grep -qF "$name" <<<"$out" || break
    sleep 0.1
done
check "the closed connection is gone" lacks "$out" "$name"
kill "$latency_pid" 2>/dev/null
wait "$latency_pid" 2>/dev/null

rmq delete queue --name rmq-q >/dev/null
rmq delete exchange --name rmq-x >/dev/null
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
ferryd_finish $?
