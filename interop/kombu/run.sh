#!/usr/bin/env bash
# Run kombu's and py-amqp's own integration tests (the AMQP 0-9-1 stack under Celery)
# against ferryd: kombu's t/integration/test_py_amqp.py (connections, failover, exchange
# types, TTL, priorities, acks and rejects) and py-amqp's t/integration/test_rmq.py.
#
#   interop/kombu/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/kombu/run.sh        test a broker already on 127.0.0.1:N
#
# The tests ship in the two projects' source distributions, fetched once from PyPI and
# checked against their SHA-256, unpacked in the run's work directory. They find the broker
# through RABBITMQ_HOST and RABBITMQ_5672_TCP. The clients and pytest come from PyPI into
# .venv (requirements.txt pins them); pytest-rerunfailures is left out, so the suites'
# "flaky" reruns do not hide a failure. Extra pytest arguments go in PYTEST_ARGS. Exits with
# pytest's status.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)

sdists=(
    "kombu-5.5.4 https://files.pythonhosted.org/packages/0f/d3/5ff936d8319ac86b9c409f1501b07c426e6ad41966fedace9ef1b966e23f 886600168275ebeada93b888e831352fe578168342f0d1d5833d88ba0d847363"
    "amqp-5.3.1 https://files.pythonhosted.org/packages/79/fc/ec94a357dfc6683d8c86f8b4cfa5416a4c36b28052ec8260c77aca96a443 cddc00c725449522023bad949f70fff7b48f0b1ade74d170a6f10ab044739432"
)
# Of py-amqp's tests only the plain-connection ones run: the TLS variants need the
# certificates of its repository's Docker set-up (not in the source distribution), and two
# tests connect to badssl.com.
only=plain

for entry in "${sdists[@]}"; do
    read -r name url sha256 <<<"$entry"
    fetch_sdist "$here" "$url/$name.tar.gz" "$sha256"
done

ferryd_start "${1:-}"
export RABBITMQ_HOST=127.0.0.1 RABBITMQ_5672_TCP=$port
PYTEST_ARGS="-p no:warnings ${PYTEST_ARGS:-}" \
    run_pytest_suite "$here" "import kombu, amqp, pytest" "$workdir/kombu-5.5.4" \
    t/integration/test_py_amqp.py
status=$?
# Both suites' test modules are t.integration.*: each runs from its own tree, in turn.
if [ $status -eq 0 ]; then
    PYTEST_ARGS="-p no:warnings -k $only ${PYTEST_ARGS:-}" \
        run_pytest_suite "$here" "import kombu, amqp, pytest" "$workdir/amqp-5.3.1" \
        t/integration/test_rmq.py
    status=$?
fi
ferryd_finish $status
