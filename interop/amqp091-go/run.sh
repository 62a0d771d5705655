#!/usr/bin/env bash
# Run the RabbitMQ Go client's own integration tests (github.com/rabbitmq/amqp091-go,
# `go test -tags integration`) against ferryd over AMQP 0-9-1.
#
#   interop/amqp091-go/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/amqp091-go/run.sh        test a broker already on 127.0.0.1:N
#
# The pinned module comes from the Go module proxy (`go mod download`, kept in the module
# cache); a writable copy is tested in the run's work directory. The package's unit tests run
# too (they need no broker). Extra `go test` arguments go in GO_TEST_ARGS (e.g. -race, or
# -run TestIntegrationOpenClose). Exits with go test's status.
source "$(dirname "$0")/../lib/ferryd.sh"

module=github.com/rabbitmq/amqp091-go
version=v1.16.0

# Tests that need what only RabbitMQ has. Each is skipped for the reason given; anything
# else that fails is a ferryd bug until shown otherwise.
skip=(
    # Run only when the server's product property is "RabbitMQ"; against any other broker
    # they test nothing and leave their connection open, which goleak (TestMain) reports.
    TestIntegrationRecoverNotImplemented
    TestRabbitMQQueueTTLGet
    TestRabbitMQQueueNackMultipleRequeue
    # Expects RabbitMQ's refusal of channel.flow active=false (540 NOT_IMPLEMENTED); ferryd
    # implements flow, and the test then dereferences the nil error and panics.
    TestIntegrationConsumeFlow
    # Force-close the client's connection through the RabbitMQ management plugin's HTTP API
    # (DELETE http://localhost:15672/api/connections/NAME) to exercise client recovery.
    TestConnectionRecoveryPublish
    TestConnectionRecoveryConsume
    TestConnectionRecoveryCustomSASLPlainAuth
    TestConnectionRecoveryChannelIDReservation
    TestConnectionRecoveryLifeCycleNotifyStateChange
    TestConnectionRecoveryCancelInterrupt
    TestConnectionRecoveryExclusiveQueue
    TestConnectionRecoveryDeletedQueueSkip
    TestConnectionRecoveryTopologyOnlyTransient
    TestConnectionRecoveryMultiChannelTopology
    TestConnectionRecoveryTopologyAllEnabled
    TestConnectionRecoveryTopologyDisabled
    TestConnectionRecoveryExhaustionDoesNotPanic
    TestConnectionRecoveryAutoDeleteTopologyForgotten
    TestConnectionRecoveryAutoDeleteExchangeCascade
    TestConnectionRecoverySkipAndContinue
    TestConnectionRecoveryConsumerNotForgottenAfterFailedResubscribe
    # Not listed: TestConnection_Close_WhenMemoryAlarmIsActive drives `rabbitmqctl
    # set_vm_memory_high_watermark` and skips itself without RABBITMQ_RABBITMQCTL_PATH.
)

command -v go >/dev/null || { echo "run.sh: go is needed" >&2; exit 2; }
src=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "run.sh: go mod download $module@$version failed" >&2; exit 2; }
cp -r "$src" "$workdir/amqp091-go" && chmod -R u+w "$workdir/amqp091-go" || exit 2
(cd "$workdir/amqp091-go" && go mod download) || { echo "run.sh: fetching the test dependencies failed" >&2; exit 2; }

ferryd_start "${1:-}"
skip_re="^($(IFS='|'; echo "${skip[*]}"))\$"
unset RABBITMQ_RABBITMQCTL_PATH
# shellcheck disable=SC2086
(cd "$workdir/amqp091-go" && AMQP_URL="amqp://guest:guest@127.0.0.1:$port/" \
    go test -tags integration -count=1 -timeout 300s -v -skip "$skip_re" ${GO_TEST_ARGS:-} . \
    >"$workdir/go-test.log" 2>&1)
status=$?
# The verdict of every test, the failures' output, and go test's closing lines.
grep -E '^(--- (FAIL|SKIP)|FAIL|ok|PASS)' "$workdir/go-test.log" | grep -v -- '--- SKIP' || true
if [ $status -ne 0 ]; then
    echo "---- failing tests' output ----" >&2
    awk '/^=== RUN/{buf=""} {buf=buf $0 "\n"} /^--- FAIL/{printf "%s", buf; buf=""}' "$workdir/go-test.log" |
        grep -v '^=== RUN' | head -n 200 >&2
    grep -n -A 30 '^panic:\|^goleak' "$workdir/go-test.log" | head -n 60 >&2
fi
printf '%s passed, %s failed, %s skipped\n' "$(grep -c -- '^--- PASS' "$workdir/go-test.log")" \
    "$(grep -c -- '^--- FAIL' "$workdir/go-test.log")" "$(grep -c -- '^--- SKIP' "$workdir/go-test.log")"
ferryd_finish $status
