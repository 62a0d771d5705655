#!/usr/bin/env bash
# Apache Qpid's own management tools, qpid-config and qpid-stat from qpid-tools 1.36 (QMF v2
# over AMQP 0-10, Python 2.7), against ferryd --mgmt-enable yes: creates, lists, binds,
# unbinds and deletes queues and exchanges and checks what the tools print. Run by
# scripts/test.sh (it needs Python 2.7 and the qpid sdists); about 10 s.
#
#   interop/qpid-tools/run.sh [FERRYD_BINARY]
#   FERRY_PORT=N interop/qpid-tools/run.sh     a broker already on 127.0.0.1:N (with management)
#
# Python 2.7 and the sdists as for interop/qpid-python (lib/qpid-sdists.sh); the suite ACL
# applies (FERRY_ACL_FILE= turns it off).
here=$(cd "$(dirname "$0")" && pwd)
export FERRY_MGMT=1
source "$here/../lib/ferryd.sh"
source "$here/../lib/qpid-sdists.sh"

ferryd_start "${1:-}"
export PYTHONPATH="$qpid_python:$qpid_tools/lib"
broker=127.0.0.1:$port
holder=""
cleanup_holder() { [ -n "$holder" ] && kill "$holder" 2>/dev/null; }
trap 'cleanup_holder; ferryd_stop' EXIT

failures=0
out=""
# Runs a tool, prints the command and its output; the output stays in $out.
run() {
    local tool=$1
    shift
    echo "\$ $tool $*"
    out=$(timeout 30 "$py2" "$qpid_tools/bin/$tool" -b "$broker" "$@" 2>&1)
    status=$?
    printf '%s\n' "$out" | sed 's/^/    /'
}
fail() {
    echo "FAILED: $*" >&2
    failures=$((failures + 1))
}
ok() { # command args... : the tool must succeed
    run "$@"
    [ "$status" -eq 0 ] || fail "$* exited $status"
}
refused() { # the tool must fail
    run "$@"
    [ "$status" -ne 0 ] || fail "$* succeeded"
}
has() { # an extended regex the last output must match
    printf '%s\n' "$out" | grep -Eq -- "$1" || fail "no line matching '$1'"
}
lacks() {
    printf '%s\n' "$out" | grep -Eq -- "$1" && fail "a line matches '$1'"
}
client() { "$py2" "$here/client.py" "$broker" "$@"; }

ok qpid-config exchanges
has '^direct +qmf\.default\.direct'
has '^topic +qmf\.default\.topic'
has '^topic +amq\.topic +--durable'

ok qpid-config add queue ferry-q1 --durable --max-queue-count 5 --limit-policy ring
ok qpid-config add queue ferry-q2 --max-queue-size 100000 --argument x-ferry-test=1
ok qpid-config add exchange topic ferry-t1
ok qpid-config add exchange headers ferry-h1 --durable
ok qpid-config bind ferry-t1 ferry-q1 'news.#'
ok qpid-config bind ferry-h1 ferry-q2 hk all colour=red
refused qpid-config add queue ferry-q1
has 'object already exists: ferry-q1'
refused qpid-config add exchange xml ferry-x1
has 'Invalid exchange type: xml'

ok qpid-config queues
has '^ferry-q1 +--durable --max-queue-count=5 --limit-policy=ring'
has '^ferry-q2 +--max-queue-size=100000 --argument x-ferry-test=1'
lacks 'qmf\.agent'
ok qpid-config exchanges
has '^topic +ferry-t1'
has '^headers +ferry-h1 +--durable'
ok qpid-config -r queues ferry-q
has "^Queue 'ferry-q1'"
has '^    bind \[news\.#\] => ferry-t1$'
has "^    bind \[ferry-q1\] => ''"
has "^    bind \[hk\] => ferry-h1 .*'colour': u?'red'"
ok qpid-config -r exchanges ferry-t1
has "^Exchange 'ferry-t1' \(topic\)"
has '^    bind \[news\.#\] => ferry-q1$'
ok qpid-config
has 'Total Queues: '

# Traffic: 3 messages routed to ferry-q1, 1 dropped by ferry-t1.
client send 'ferry-t1/news.sport' 3 || fail "sending to ferry-t1"
client send 'ferry-t1/weather' 1 || fail "sending to ferry-t1"
ok qpid-stat -q
has '^  ferry-q1 +Y +3 +3 +0 '
has '^  ferry-q2 +0 +0 +0 '
ok qpid-stat -q ferry-q1
has '^  ferry-q1 +Y +N +N +N +0 +0 +2$'
has "arguments +\{.*'qpid.max_count': 5"
has '^  queue-depth +3 '
has '^  total-enqueues +3 '
ok qpid-stat -e
has '^  ferry-t1 +topic +1 +4 +3 +1 '
has '^  ferry-h1 +headers +Y +1 '

# A consumer that stays, for connections, sessions and subscriptions (sessions are
# reported to management within a second of changing).
: >"$workdir/holder.out"
# Started directly, not through `client`: backgrounding the function would make $! a
# subshell, and killing that would leave the Python process running after the suite.
"$py2" "$here/client.py" "$broker" hold ferry-q2 >"$workdir/holder.out" 2>&1 &
holder=$!
for _ in $(seq 50); do grep -q holding "$workdir/holder.out" && break; sleep 0.1; done
sleep 1.5
ok qpid-stat -c
has '^  127\.0\.0\.1:[0-9]+ +client\.py +[0-9]+ +- +anonymous'
ok qpid-stat -u
# (browse and excl are blank when false, as qpid-stat prints them)
has '^  0 +ferry-q2 +127\.0\.0\.1:[0-9]+ +client\.py +[0-9]+ +Y +WINDOW +0 +0$'
ok qpid-stat -g
has '^  [0-9]+s +<standalone> +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$'
has '^  total-enqueues +[0-9]'
has '^  discards-no-route +[1-9]'
ok qpid-stat -m
has 'Broker Memory Statistics'
ok qpid-stat -q
has '^  ferry-q2 +0 +0 +0 +0 +0 +0 +1 +2$'

ok qpid-config unbind ferry-t1 ferry-q1 'news.#'
ok qpid-config -r exchanges ferry-t1
lacks 'bind \[news\.#\]'
refused qpid-config del queue ferry-q1
has 'queue not empty|has messages|not empty'
ok qpid-config del queue ferry-q1 --force
refused qpid-config del queue ferry-q2
ok qpid-config del queue ferry-q2 --force
ok qpid-config del exchange ferry-t1
ok qpid-config del exchange ferry-h1
refused qpid-config del exchange amq.direct
ok qpid-config queues
lacks '^ferry-q'
ok qpid-config exchanges
lacks 'ferry-[th]1'

cleanup_holder
if [ "$failures" -ne 0 ]; then
    echo "qpid-tools: $failures check(s) failed" >&2
    ferryd_finish 1
fi
echo "qpid-tools: all checks passed"
ferryd_finish 0
