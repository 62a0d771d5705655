#!/usr/bin/env bash
# Run Apache Qpid Broker-J 10.1.0 in the foreground as a reference AMQP 0-10
# broker on 127.0.0.1:PORT (0 = any free port). Prints
#   BROKERJ READY 127.0.0.1:<port> amqp-0-10 vhost=default user=guest/guest
# once the AMQP port is bound. Stop it with SIGTERM or Ctrl-C.
#
# Environment:
#   BROKERJ_JAVA_OPTS   extra JVM options (e.g. -Xmx1g)
#   BROKERJ_OPLOG       level of Broker-J's operational log on stdout
#                       (INFO shows CON-1001 lines with the protocol version;
#                       WARN keeps benchmarks quiet). Default INFO.
set -euo pipefail

if [ $# -ne 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 PORT   (0 = any free port)" >&2
    exit 2
fi
port=$1
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

# First run downloads Broker-J from Maven Central; later runs reuse ~/.m2 and
# only recompile if the launcher changed. Maven output goes to stderr so the
# READY line is the first thing on stdout that a caller has to look for.
mvn -B -q compile dependency:build-classpath \
    -Dmdep.outputFile=target/classpath.txt >&2

exec java ${BROKERJ_JAVA_OPTS:-} \
    -Dferry.brokerj.oplog_level="${BROKERJ_OPLOG:-INFO}" \
    -cp "target/classes:$(cat target/classpath.txt)" \
    ferry.brokerj.Launcher "$port"
