#!/usr/bin/env bash
# Run rabbitpy's own integration tests against ferryd: another AMQP 0-9-1 client of its own
# (on pamqp, as AMQPStorm is), whose tests find the broker through RABBITMQ_URL.
#
#   interop/rabbitpy/run.sh [FERRYD_BINARY]   start ferryd, test, stop it
#
# The tests ship in rabbitpy's source distribution, fetched once from PyPI and checked
# against its SHA-256, unpacked in the run's work directory. ferryd checks logins here (the
# tests include a refused one); guest may log in from loopback, as in RabbitMQ. pamqp,
# python-dotenv and pytest come from PyPI into .venv. Extra pytest arguments go in
# PYTEST_ARGS. Exits with pytest's status.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)

name=rabbitpy-3.0.2
fetch_sdist "$here" \
    "https://files.pythonhosted.org/packages/b6/46/4d36cfd2f15f9f919ea1ccccd59e900617371f41fb97ecdcd147d98d5619/$name.tar.gz" \
    9322a1e82b4d3d1afc21a617ce0b1e86b921174328735e7d54abc9525805ae5c

FERRYD_ARGS="--auth yes --users-file $workdir/no-users-file ${FERRYD_ARGS:-}"
ferryd_start "${1:-}"
export RABBITMQ_URL="amqp://guest:guest@127.0.0.1:$port/%2F"
# The broker tests: tests/test_integration.py and tests/integration/ (the rest are unit tests).
PYTEST_ARGS="-p no:warnings tests/integration ${PYTEST_ARGS:-}" \
    run_pytest_suite "$here" "import pamqp, dotenv, pytest" "$workdir/$name" \
    tests/test_integration.py
ferryd_finish $?
