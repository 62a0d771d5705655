#!/usr/bin/env bash
# Run the rhea (Node.js, AMQP 1.0) interop suite against ferryd.
#
#   interop/rhea/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/rhea/run.sh        test a broker already on 127.0.0.1:N
#
# Installs rhea from npm (package-lock.json pins it) on first use, and runs the suite with
# Node's built-in test runner.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "run.sh: node is needed" >&2; exit 2; }
if [ ! -d "$here/node_modules/rhea" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --silent) || { echo "run.sh: npm ci failed" >&2; exit 2; }
fi
ferryd_start "${1:-}"
(cd "$here" && FERRY_PORT=$port node --test --test-concurrency=1 test/)
ferryd_finish $?
