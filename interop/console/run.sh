#!/usr/bin/env bash
# ferryd's web console in a real browser: Debian's Chromium (/usr/bin/chromium) driven by
# playwright-core, with node's built-in test runner. ferryd runs with --auth yes and a
# users file made here (a random password), management sampling every second, and AMQP
# traffic from the `ferry` binary beside it.
#
#   interop/console/run.sh [FERRYD_BINARY]      start ferryd, test, stop it
#
# Installs what it needs on first use: the Debian packages chromium and chromium-driver
# (apt-get, as root) when /usr/bin/chromium is missing, and playwright-core into
# interop/console/node_modules with `npm ci` (Playwright's own browser download is not
# used: it fails here). Screenshots (PNG) go to interop/console/out/ (CONSOLE_OUT to
# change), their paths printed. Extra node --test arguments go in NODE_TEST_ARGS, e.g.
# NODE_TEST_ARGS="--test-name-pattern=XSS". Exits non-zero on any failure.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)
started=$SECONDS

if [ ! -x /usr/bin/chromium ]; then
    echo "run.sh: installing Debian's chromium and chromium-driver"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        chromium chromium-driver; } >"$workdir/apt.log" 2>&1 || {
        echo "run.sh: apt-get install chromium failed:" >&2
        tail -n 30 "$workdir/apt.log" >&2
        exit 2
    }
    echo "run.sh: chromium installed ($((SECONDS - started)) s)"
fi
command -v node >/dev/null || { echo "run.sh: node is needed" >&2; exit 2; }
# Installs again when the lock file is newer than the last install's record of it.
if [ ! -f "$here/node_modules/.package-lock.json" ] ||
    [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
    t=$SECONDS
    echo "run.sh: npm ci in $here"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || { echo "run.sh: npm ci failed" >&2; exit 2; }
    echo "run.sh: node modules installed ($((SECONDS - t)) s)"
fi

ferryd=${1:-$repo_root/target/debug/ferryd}
# Absolute: the tests run in this directory, and spawn it.
ferry=$(cd "$(dirname "$ferryd")" && pwd)/ferry
[ -x "$ferry" ] || { echo "run.sh: no ferry binary at $ferry (cargo build -p ferry-tools)" >&2; exit 2; }

# A users file with one administrator and one more user, for the login and users tests.
# The password is made up per run: nothing secret is kept in the repository.
export CONSOLE_USER=console-admin
CONSOLE_PASSWORD=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CONSOLE_PASSWORD
for u in "$CONSOLE_USER" console-viewer; do
    printf '%s\n' "$CONSOLE_PASSWORD" |
        "$ferry" user add "$u" --password-stdin --users-file "$workdir/users" >/dev/null 2>&1 ||
        { echo "run.sh: ferry user add $u failed" >&2; exit 1; }
done
# The administrator tag lets console-admin see the other user (as in RabbitMQ).
"$ferry" user tags "$CONSOLE_USER" --set administrator --users-file "$workdir/users" >/dev/null

# Samples every second, so rates and charts fill within the suite's first seconds.
FERRYD_ARGS="--auth yes --users-file $workdir/users --mgmt-sample-interval 1000 ${FERRYD_ARGS:-}" \
    FERRY_MGMT=1 ferryd_start "$ferryd"
[ -n "${FERRY_MGMT_PORT:-}" ] || { echo "run.sh: ferryd printed no management port" >&2; exit 1; }
echo "run.sh: management on http://127.0.0.1:$FERRY_MGMT_PORT/"

export CONSOLE_OUT=${CONSOLE_OUT:-$here/out}
mkdir -p "$CONSOLE_OUT"
rm -f "$CONSOLE_OUT"/*.png
export FERRY_PORT_AMQP=$port FERRY_BIN=$ferry FERRY_MGMT_PORT
t=$SECONDS
# The files run one after another (the scale test's 10,000 queues would slow the others),
# each test in a file in order, sharing one browser.
# shellcheck disable=SC2086
(cd "$here" && node --test --test-concurrency=1 --test-reporter=spec ${NODE_TEST_ARGS:-} \
    tests/console.test.mjs tests/scale.test.mjs)
status=$?
echo "run.sh: browser tests took $((SECONDS - t)) s, run.sh $((SECONDS - started)) s in all"
ferryd_finish $status
