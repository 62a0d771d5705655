#!/usr/bin/env bash
# Run AMQPStorm's own functional tests against ferryd: an independent AMQP 0-9-1 client (not
# built on pika or py-amqp) and a client of RabbitMQ's management HTTP API, whose suite
# drives both against one broker.
#
#   interop/amqpstorm/run.sh [FERRYD_BINARY]   start ferryd (with management), test, stop it
#
# The tests ship in AMQPStorm's source distribution, fetched once from PyPI and checked
# against its SHA-256, unpacked in the run's work directory. They find the broker through
# AMQP_HOST, AMQP_URI and AMQP_HTTP_URL; conftest.py (copied beside them) gives their
# connections ferryd's port. pamqp, requests and pytest come from PyPI into .venv. Extra
# pytest arguments go in PYTEST_ARGS. Exits with pytest's status.
source "$(dirname "$0")/../lib/ferryd.sh"
here=$(cd "$(dirname "$0")" && pwd)

name=amqpstorm-3.1.4
fetch_sdist "$here" \
    "https://files.pythonhosted.org/packages/85/4e/be9ef995414af0b89564638b97a88f5f19745773b332bef595994e57cc77/$name.tar.gz" \
    8c4c81430b3e3f06c88474a8ed883b48a62068f14490e339d6e0fc3329f030d3
cp "$here/conftest.py" "$workdir/$name/"

# Logins are checked (guest may log in from loopback, as in RabbitMQ), so the suite's test of
# bad credentials runs.
FERRYD_ARGS="--auth yes --users-file $workdir/no-users-file ${FERRYD_ARGS:-}"
FERRY_MGMT=1 ferryd_start "${1:-}"
[ -n "${FERRY_MGMT_PORT:-}" ] || { echo "run.sh: ferryd printed no management port" >&2; exit 1; }
export AMQP_HOST=127.0.0.1 AMQP_USERNAME=guest AMQP_PASSWORD=guest
export AMQP_URI="amqp://guest:guest@127.0.0.1:$port/%2F"
export AMQP_HTTP_URL="http://127.0.0.1:$FERRY_MGMT_PORT"

tests=amqpstorm/tests/functional
# Left out, each for what ferryd does not offer or the test's own set-up:
# - ssl/: the certificates of AMQPStorm's CI set-up (not in the source distribution);
# - virtual hosts and permissions through the API (the virtual-host, queue-list and web tests
#   that create a virtual host of their own, and the users' permission tests): ferryd has one
#   virtual host, and its ACL file instead of RabbitMQ's permissions (README, Management);
# - test_api_cluster_name: compares the name with the project's own RabbitMQ host's;
# - test_api_with_inaccessible: reaches for a LAN address;
# - the reliability tests' Select and Poll classes: the same tests again over the client's
#   socket pollers (select is already the default), which the broker cannot tell apart;
#   they would add half a minute.
deselect=(
    --ignore="$tests/ssl"
)
for t in management/test_api.py::ApiFunctionalTests::test_api_cluster_name \
    management/test_api.py::ApiFunctionalTests::test_api_with_inaccessible \
    management/test_user.py::ApiUserFunctionalTests::test_api_user_get_permission \
    management/test_user.py::ApiUserFunctionalTests::test_api_user_get_permissions \
    management/test_queue.py::ApiQueueFunctionalTests::test_api_queue_list_filter_with_regex \
    management/test_queue.py::ApiQueueFunctionalTests::test_api_queue_list_filter_with_regex_boolean \
    management/test_queue.py::ApiQueueFunctionalTests::test_api_queue_list_filter_without_regex \
    management/test_queue.py::ApiQueueFunctionalTests::test_api_queue_list_no_pagination \
    management/test_queue.py::ApiQueueFunctionalTests::test_api_queue_list_pagination \
    management/test_virtual_host.py::ApiUserFunctionalTests::test_api_virtual_host_create \
    management/test_virtual_host.py::ApiUserFunctionalTests::test_api_virtual_host_permissions \
    test_web_based.py::WebFunctionalTests::test_functional_alternative_virtual_host \
    test_reliability.py::ReliabilityFunctionalTestsSelect \
    test_reliability.py::ReliabilityFunctionalTestsPoll \
    test_reliability.py::PublishAndConsume1kTestSelect \
    test_reliability.py::PublishAndConsume1kTestPoll \
    test_reliability.py::Consume1kUntilEmptySelect \
    test_reliability.py::Consume1kUntilEmptyPoll; do
    deselect+=(--deselect "$tests/$t")
done

PYTEST_ARGS="-p no:warnings ${deselect[*]} ${PYTEST_ARGS:-}" \
    run_pytest_suite "$here" "import pamqp, requests, pytest" "$workdir/$name" "$tests"
ferryd_finish $?
