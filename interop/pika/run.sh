#!/usr/bin/env bash
# Run the pika (AMQP 0-9-1) interop suite against ferryd.
#
#   interop/pika/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/pika/run.sh        test a broker already on 127.0.0.1:N
#
# Creates interop/pika/.venv with pika and pytest from PyPI on first use. Extra pytest
# arguments go in PYTEST_ARGS. Exits non-zero on any failure, including "no tests ran".
source "$(dirname "$0")/../lib/ferryd.sh"
ferryd_start "${1:-}"
ferryd_start_secure "${1:-}"
run_pytest_suite "$(cd "$(dirname "$0")" && pwd)" "import pika, pytest"
ferryd_finish $?
