#!/usr/bin/env bash
# Run aio-pika's own test suite (the asyncio AMQP 0-9-1 client, over aiormq and pamqp)
# against ferryd.
#
#   interop/aio-pika/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/aio-pika/run.sh        test a broker already on 127.0.0.1:N
#
# The tests ship in aio-pika's source distribution, fetched once from PyPI and checked
# against its SHA-256; each run unpacks it in the run's work directory and appends
# ferry_conftest.py to its conftest, which points the suite at ferryd instead of a Docker
# container. The client and pytest come from PyPI into .venv (requirements.txt pins them).
# Extra pytest arguments go in PYTEST_ARGS. Exits with pytest's status.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)

version=10.2.1
sdist=aio_pika-$version.tar.gz
sdist_url=https://files.pythonhosted.org/packages/5d/31/70f0d7a9fe1affc3241d86d24c24714a4a2ac648961efd3d835ef734a6a1/$sdist
sdist_sha256=e4f77afd9179a3cca5a904c3b0a1190256a36d9f90650db908b1b2245eb27487

# Left out, each for the reason given; anything else that fails is a ferryd bug until shown
# otherwise.
skip=(
    # Need the Docker container itself: its TLS listener and certificates, or stopping,
    # killing and restarting it (rabbitmqctl stop_app, docker kill).
    tests/test_amqps.py
    tests/test_robust_recovery.py
    # The client's own connection pool, tested with stand-in objects: no broker is involved,
    # and its sleeps take about a minute.
    tests/test_pool.py
    # Races inside the client that a broker answering within a millisecond loses; each
    # passes against ferryd through a proxy that delays its replies by 2 ms, and against
    # RabbitMQ 3.10.8. A channel's close callback still running when the test collects
    # garbage right after the connection closed:
    tests/test_memory_leak.py::test_leak_unclosed_channel
    # The client's reader and writer tasks finishing in the other order after close-ok, so
    # a channel sees a normal close and tries to reopen on the closed connection:
    tests/test_reconnect_channel_snapshot.py::test_create_channels_during_reconnect
)

fetch_sdist "$here" "$sdist_url" "$sdist_sha256"
src=$workdir/aio_pika-$version
cat "$here/ferry_conftest.py" >>"$src/tests/conftest.py"

# Authentication on (the suite checks that wrong credentials are refused), with no users
# file: the built-in guest/guest from loopback, as the RabbitMQ the suite expects has.
FERRYD_ARGS="--auth yes --users-file $workdir/no-users-file ${FERRYD_ARGS:-}"
ferryd_start "${1:-}"
deselect=$(printf -- '--deselect %s ' "${skip[@]}")
PYTEST_ARGS="-p no:warnings -o log_cli=false $deselect${PYTEST_ARGS:-}" \
    run_pytest_suite "$here" "import aio_pika, aiomisc, pytest" "$src" tests
ferryd_finish $?
