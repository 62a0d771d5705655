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

QPID_PYTHON=qpid-python-1.36.0-1
QPID_PYTHON_SHA=1a341981723a7980163e6d33530f29133433742f6f9b5b12b46d5d239548afee
QPID_TOOLS=qpid-tools-1.36.0-1
QPID_TOOLS_SHA=14af55c6e47bcc24b2199110d57242e014f05708fba1d8d224254c917131505b

find_python2() {
    if [ -n "${PYTHON2:-}" ]; then echo "$PYTHON2"; return; fi
    # (a pyenv shim for python2.7 exists but fails unless 2.7 is the active version)
    if python2.7 -c pass 2>/dev/null; then command -v python2.7; return; fi
    local root
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    local p
    for p in "$root"/versions/2.7*/bin/python; do
        [ -x "$p" ] && { echo "$p"; return; }
    done
}
py2=$(find_python2)
if [ -z "$py2" ]; then
    echo "run.sh: no Python 2.7 (set PYTHON2, or: pyenv install 2.7.18)" >&2
    exit 2
fi

cache=$here/.cache
mkdir -p "$cache"
fetch() { # name sha
    local name=$1 sha=$2 pkg=${1%-1}
    if [ ! -d "$cache/$name" ]; then
        if [ ! -f "$cache/$name.tar.gz" ]; then
            # qpid-python==1.36.0.post1 is the sdist qpid-python-1.36.0-1.tar.gz.
            (cd "$cache" && "$py2" -m pip download -q --no-deps "${pkg%-*}==${pkg##*-}.post1") || {
                echo "run.sh: pip download ${pkg%-*} failed" >&2; exit 2; }
        fi
        echo "$sha  $cache/$name.tar.gz" | sha256sum -c --quiet - || {
            echo "run.sh: checksum mismatch for $name.tar.gz" >&2; exit 2; }
        tar -xzf "$cache/$name.tar.gz" -C "$cache"
    fi
}
fetch "$QPID_PYTHON" "$QPID_PYTHON_SHA"
fetch "$QPID_TOOLS" "$QPID_TOOLS_SHA"

ferryd_start "${1:-}"
shift || true
[ $# -eq 0 ] && set -- 'qpid_tests.broker_0_10.*'

src=$cache/$QPID_PYTHON
# qpid.testlib imports qmf.console, which ships in qpid-tools' lib/.
(cd "$src" && PYTHONPATH="$src:$cache/$QPID_TOOLS/lib" "$py2" qpid-python-test \
    -b "amqp://guest/guest@127.0.0.1:$port" -m qpid_tests.broker_0_10 -t \
    -x "${QPID_XML:-$cache/results.xml}" ${ignore_file:+-I "$ignore_file"} ${QPID_TEST_ARGS:-} "$@")
ferryd_finish $?
