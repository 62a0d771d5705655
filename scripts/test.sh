#!/usr/bin/env bash
# The whole test suite: formatting, lints, Rust unit and integration tests, the generated
# protocol tables' freshness check, a short fuzz run, and the interop tests with real
# third-party clients: Apache Qpid JMS and qpid-config/qpid-stat (AMQP 0-10); pika, the
# RabbitMQ Java client, Celery, and the RabbitMQ Go client's, amqplib's, aio-pika's, kombu's,
# py-amqp's, AMQPStorm's and rabbitpy's own tests (AMQP 0-9-1, AMQPStorm's with the
# management API); python-qpid-proton, Qpid JMS 2.x and rhea (AMQP 1.0); the management API
# with Prometheus's parser and the web console in Chromium; a chaos run of a 3-node cluster.
# Installs what it needs (Java, Maven, Node.js and Chromium via apt-get, pika, proton and
# pytest into venvs from PyPI, aio-pika's, kombu's, py-amqp's, AMQPStorm's and rabbitpy's
# tests from their PyPI source archives, rhea, amqplib and playwright-core from npm, cargo-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each section's time, listed at the end (also when a step fails), so that the suite's
# distance from CI's 30-minute limit can be read from any run's log.
timings=()
current_section=""
section_started=$SECONDS
section() {
  if [[ -n $current_section ]]; then
    timings+=("$(printf '%6ds  %s' $((SECONDS - section_started)) "$current_section")")
  fi
  current_section=$*
  section_started=$SECONDS
  printf '\n== %s ==\n' "$*"
}
report_timings() {
  local status=$? lane_status=0
  # A failure elsewhere still shows the side lane's output and times; its suites are bounded
  # in time, so waiting for them leaves nothing running behind. The first failure's status
  # is the run's.
  if [[ -n ${side_lane_pid:-} ]]; then
    section "waiting for the side lane"
    finish_side_lane || lane_status=$?
    ((status)) || status=$lane_status
  fi
  section "time per section"
  printf '%s\n' "${timings[@]}"
  printf '%6ds  in all\n' "$SECONDS"
  return "$status"
}
trap report_timings EXIT

# Interop suites that spend their minutes waiting on their own timeouts and sleeps, not on the
# CPU, run in a side lane beside the others, each with its own ferryd on its own port (every
# suite starts one, memory-only): that keeps the whole run well inside CI's 30 minutes. The
# lane's output is kept in a file and shown in one piece when it ends, so that the log still
# reads a section at a time; its sections' times are listed with the others, marked.
side_lane_pid=""
side_lane_dir=""
# Arguments: "title|command" entries, run one after another; the lane stops at a failure.
# A command is split at spaces, with no quoting.
start_side_lane() {
  side_lane_dir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-side-lane.XXXXXX")
  (
    set +e
    for entry in "$@"; do
      title=${entry%%|*}
      started=$SECONDS
      printf '\n== %s (side lane) ==\n' "$title"
      ${entry#*|}
      status=$?
      printf '%6ds  %s (side lane)\n' $((SECONDS - started)) "$title" >>"$side_lane_dir/times"
      if ((status)); then
        printf 'side lane: "%s" failed (exit %d)\n' "$title" "$status"
        exit "$status"
      fi
    done
  ) >"$side_lane_dir/log" 2>&1 </dev/null &
  side_lane_pid=$!
}
finish_side_lane() {
  local status=0
  wait "$side_lane_pid" || status=$?
  side_lane_pid=""
  cat "$side_lane_dir/log"
  [[ -f $side_lane_dir/times ]] && mapfile -t -O "${#timings[@]}" timings <"$side_lane_dir/times"
  rm -rf "$side_lane_dir"
  return "$status"
}
# A stop signal sent to this script alone (a process group's gets to the lane anyway) stops
# the lane's suites too, instead of waiting for them: each run.sh then stops its ferryd.
stop_side_lane() {
  [[ -n ${side_lane_pid:-} ]] || return 0
  # Listed before any is signalled: a process gone no longer lists its children.
  local pids
  pids=$(process_tree "$side_lane_pid")
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
}
# A process and its descendants (Linux's /proc children lists).
process_tree() {
  local child
  echo "$1"
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    process_tree "$child"
  done
}
trap 'stop_side_lane; exit 143' TERM
trap 'stop_side_lane; exit 130' INT

need_apt=()
command -v java >/dev/null || need_apt+=(default-jdk-headless)
command -v mvn >/dev/null || need_apt+=(maven)
command -v python3 >/dev/null || need_apt+=(python3 python3-venv)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
command -v curl >/dev/null || need_apt+=(curl)
if ((${#need_apt[@]})); then
  section "installing ${need_apt[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# The generated 0-10 tables and the hand-written 0-9-1 ones are checked against the AMQP
# specs, which live outside the project (../shared/specs, or FERRY_SPECS_DIR): those checks
# must run here, not skip.
export FERRY_SPECS_DIR=${FERRY_SPECS_DIR:-$(cd .. && pwd)/shared/specs}
export FERRY_REQUIRE_SPECS=1
for spec in amqp-0-10-qpid-errata.stripped.xml amqp-0-9-1.stripped.xml; do
  [[ -f "$FERRY_SPECS_DIR/$spec" ]] || {
    echo "scripts/test.sh: $FERRY_SPECS_DIR/$spec not found; set FERRY_SPECS_DIR to the AMQP specs directory" >&2
    exit 1
  }
done

section "cargo fmt"
cargo fmt --all -- --check
# The fuzz targets are a workspace of their own (cargo-fuzz's layout).
cargo fmt --all --manifest-path fuzz/Cargo.toml -- --check

section "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

section "cargo build"
cargo build --workspace --locked

section "cargo test"
cargo test --workspace --locked

section "memory per queued message (1,000,000 messages of 256 B, ferryd's RSS)"
cargo test --locked -p ferryd --test memory -- --ignored --nocapture --test-threads=1

section "cluster: chaos run (3 ferryd nodes; kill -9, pause, partition; 60 s)"
# Jepsen-style: publishers with confirms and consumers while faults are injected; fails if a
# confirmed message is lost or an unexpected one delivered (docs/CLUSTER.md).
target/debug/ferry chaos --ferryd target/debug/ferryd --duration 60

section "bench: report generator"
python3 -m unittest bench/test_report.py

if [[ -x scripts/fuzz-smoke.sh ]]; then
  section "fuzz smoke run"
  # Ten seconds a target (35,000 to 700,000 inputs each here) keeps the suite well inside
  # CI's 30 minutes; scripts/fuzz-smoke.sh alone runs twenty, FUZZ_SECONDS more.
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} scripts/fuzz-smoke.sh
fi

start_side_lane \
  "interop: aio-pika's own test suite (Python asyncio, AMQP 0-9-1)|interop/aio-pika/run.sh target/debug/ferryd" \
  "interop: Apache Qpid's own broker tests, qpid-python broker_0_10 (AMQP 0-10)|interop/qpid-python/run.sh target/debug/ferryd"

section "interop: Apache Qpid JMS client (AMQP 0-10)"
interop/qpid-jms/run.sh target/debug/ferryd

section "interop: Apache Qpid's qpid-config and qpid-stat over QMF (AMQP 0-10)"
interop/qpid-tools/run.sh target/debug/ferryd

section "interop: the web console in Debian's Chromium (playwright-core)"
interop/console/run.sh target/debug/ferryd

section "interop: the management API's /metrics through prometheus_client's parser"
interop/prometheus/run.sh target/debug/ferryd

section "interop: pika (AMQP 0-9-1)"
interop/pika/run.sh target/debug/ferryd

section "interop: RabbitMQ Java client (AMQP 0-9-1)"
interop/rabbitmq-java/run.sh target/debug/ferryd

section "interop: Celery worker with an rpc:// result backend (AMQP 0-9-1)"
interop/celery/run.sh target/debug/ferryd

section "interop: the RabbitMQ Go client's own integration tests (amqp091-go, AMQP 0-9-1)"
interop/amqp091-go/run.sh target/debug/ferryd

section "interop: amqplib's own integration tests (Node.js, AMQP 0-9-1)"
interop/amqplib/run.sh target/debug/ferryd

section "interop: kombu's and py-amqp's own integration tests (Python, AMQP 0-9-1)"
interop/kombu/run.sh target/debug/ferryd

section "interop: AMQPStorm's own functional tests (Python, AMQP 0-9-1 and the management API)"
interop/amqpstorm/run.sh target/debug/ferryd

section "interop: rabbitpy's own integration tests (Python, AMQP 0-9-1)"
interop/rabbitpy/run.sh target/debug/ferryd

section "interop: python-qpid-proton (AMQP 1.0)"
interop/proton/run.sh target/debug/ferryd

section "interop: Apache Qpid JMS 2.x (AMQP 1.0)"
interop/qpid-jms2/run.sh target/debug/ferryd

section "interop: rhea (AMQP 1.0)"
interop/rhea/run.sh target/debug/ferryd

section "interop: waiting for the side lane"
finish_side_lane

section "all tests passed"
