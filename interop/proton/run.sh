#!/usr/bin/env bash
# Run the python-qpid-proton (AMQP 1.0) interop suite against ferryd.
#
#   interop/proton/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/proton/run.sh        test a broker already on 127.0.0.1:N
#
# Creates interop/proton/.venv with python-qpid-proton, pika (queues are declared and
# cross-protocol checks made over 0-9-1) and pytest from PyPI on first use. Extra pytest
# arguments go in PYTEST_ARGS. Exits non-zero on any failure, including "no tests ran".
source "$(dirname "$0")/../lib/ferryd.sh"
ferryd_start "${1:-}"
ferryd_start_secure "${1:-}"
run_pytest_suite "$(cd "$(dirname "$0")" && pwd)" "import proton, pika, pytest"
ferryd_finish $?
