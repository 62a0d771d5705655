#!/usr/bin/env bash
# ferryd's /metrics read by the Prometheus Python client's own text-format parser
# (prometheus_client.parser), with AMQP 0-9-1 traffic from pika.
#
#   interop/prometheus/run.sh [FERRYD_BINARY]                 start ferryd, test, stop it
#   FERRY_PORT=N FERRY_MGMT_PORT=M interop/prometheus/run.sh  test a broker already running
#
# Creates interop/prometheus/.venv from PyPI on first use. Extra pytest arguments go in
# PYTEST_ARGS. Exits non-zero on any failure, including "no tests ran".
source "$(dirname "$0")/../lib/ferryd.sh"
FERRY_MGMT=1 ferryd_start "${1:-}"
export FERRY_MGMT_PORT
run_pytest_suite "$(cd "$(dirname "$0")" && pwd)" "import prometheus_client, pika, pytest"
ferryd_finish $?
