#!/usr/bin/env bash
# Run the Qpid JMS (AMQP 0-10) interop suite against ferryd.
#
#   interop/qpid-jms/run.sh [FERRYD_BINARY]     start ferryd, test, stop it
#   FERRY_PORT=N interop/qpid-jms/run.sh        test a broker already on 127.0.0.1:N
#
# Extra Maven arguments go in MVN_ARGS (e.g. MVN_ARGS=-Dtest=QueueTest). Exit status is
# Maven's.
source "$(dirname "$0")/../lib/ferryd.sh"
ferryd_start "${1:-}"
ferryd_start_secure "${1:-}"
ferryd_start_plain_only "${1:-}"
run_maven_suite "$(cd "$(dirname "$0")" && pwd)"
ferryd_finish $?
