#!/usr/bin/env bash
# Run Apache Qpid's own AMQP 0-10 broker tests (qpid_tests.broker_0_10 from the qpid-python
# sdist) against ferryd, with management on (the tests use QMF). scripts/test.sh runs it:
# the tests listed in not-implemented.txt (features ferryd does not have, each with its
# reason) are ignored and every other one must pass. See README.md.
#
#   interop/qpid-python/run.sh [FERRYD_BINARY] [PATTERN...]
#   FERRY_PORT=N interop/qpid-python/run.sh "" PATTERN   test a broker already on 127.0.0.1:N
#
# PATTERN is a qpid-python-test glob (default 'qpid_tests.broker_0_10.*'), e.g.
# 'qpid_tests.broker_0_10.message.*' or '*.test_no_local*'.
# Needs Python 2.7 (qpid-python 1.36 is Python 2 only): $PYTHON2, else python2.7 on PATH,
# else pyenv's 2.7.x. Downloads the pinned sdists with that Python's pip into .cache/ once.
# Writes the JUnit XML to $QPID_XML (default .cache/results.xml); the harness prints
# "Totals: N tests, N passed, ..." last and exits 1 when any test failed.
# QPID_IGNORE names the ignore file (default not-implemented.txt); QPID_IGNORE= runs every
# test, as a report of how close ferryd is to qpidd.
# FERRY_ACL_FILE defaults to none here (the suite ACL denies names no qpid test uses, but
# an ACL changes nothing these tests look at; set it to run under one).
here=$(cd "$(dirname "$0")" && pwd)
export FERRY_ACL_FILE=${FERRY_ACL_FILE-}
export FERRY_MGMT=1
ignore_file=${QPID_IGNORE-$here/not-implemented.txt}
source "$here/../lib/ferryd.sh"

# Python 2.7 and the pinned qpid-python and qpid-tools sdists ($py2, $qpid_python,
# $qpid_tools), fetched into .cache/ once.
source "$here/../lib/qpid-sdists.sh"

ferryd_start "${1:-}"
shift || true
[ $# -eq 0 ] && set -- 'qpid_tests.broker_0_10.*'

src=$qpid_python
# qpid.testlib imports qmf.console, which ships in qpid-tools' lib/.
(cd "$src" && PYTHONPATH="$src:$qpid_tools/lib" "$py2" qpid-python-test \
    -b "amqp://guest/guest@127.0.0.1:$port" -m qpid_tests.broker_0_10 -t \
    -x "${QPID_XML:-$here/.cache/results.xml}" ${ignore_file:+-I "$ignore_file"} ${QPID_TEST_ARGS:-} "$@")
ferryd_finish $?
