# Sourced by suites that run Apache Qpid's Python 2 tools: finds a Python 2.7 and fetches the
# pinned qpid-python and qpid-tools sdists into interop/qpid-python/.cache (gitignored), the
# cache interop/qpid-python/run.sh fills too. Sets:
#   py2           a Python 2.7 interpreter
#   qpid_python   the unpacked qpid-python-1.36.0-1 (qpid.messaging, the test harness)
#   qpid_tools    the unpacked qpid-tools-1.36.0-1 (bin/qpid-config, bin/qpid-stat, lib/)
# Exits 2 when there is no Python 2.7 or a download fails or does not match its checksum.

_qpid_cache=$(cd "$(dirname "${BASH_SOURCE[0]}")/../qpid-python" && pwd)/.cache
_QPID_PYTHON=qpid-python-1.36.0-1
_QPID_PYTHON_SHA=1a341981723a7980163e6d33530f29133433742f6f9b5b12b46d5d239548afee
_QPID_TOOLS=qpid-tools-1.36.0-1
_QPID_TOOLS_SHA=14af55c6e47bcc24b2199110d57242e014f05708fba1d8d224254c917131505b

_find_python2() {
    if [ -n "${PYTHON2:-}" ]; then echo "$PYTHON2"; return; fi
    # (a pyenv shim for python2.7 exists but fails unless 2.7 is the active version)
    if python2.7 -c pass 2>/dev/null; then command -v python2.7; return; fi
    local root p
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for p in "$root"/versions/2.7*/bin/python; do
        [ -x "$p" ] && { echo "$p"; return; }
    done
}

_qpid_fetch() { # name sha
    local name=$1 sha=$2 pkg=${1%-1} tmp
    [ -d "$_qpid_cache/$name" ] && return 0
    # Two suites may fill the cache at once (scripts/test.sh runs qpid-python in its side
    # lane): each works in a directory of its own and renames what it made into place, so
    # neither sees the other's half-written archive or tree.
    tmp=$(mktemp -d "$_qpid_cache/.fetch.XXXXXX") || exit 2
    if [ -f "$_qpid_cache/$name.tar.gz" ]; then
        cp "$_qpid_cache/$name.tar.gz" "$tmp/"
    else
        # qpid-python==1.36.0.post1 is the sdist qpid-python-1.36.0-1.tar.gz.
        (cd "$tmp" && "$py2" -m pip download -q --no-deps "${pkg%-*}==${pkg##*-}.post1") || {
            echo "run.sh: pip download ${pkg%-*} failed" >&2; rm -rf "$tmp"; exit 2; }
    fi
    echo "$sha  $tmp/$name.tar.gz" | sha256sum -c --quiet - || {
        echo "run.sh: checksum mismatch for $name.tar.gz" >&2; rm -rf "$tmp"; exit 2; }
    tar -xzf "$tmp/$name.tar.gz" -C "$tmp" || { rm -rf "$tmp"; exit 2; }
    mv -f "$tmp/$name.tar.gz" "$_qpid_cache/$name.tar.gz"
    # Renaming onto a tree another suite put there first fails; theirs is as good.
    mv -T "$tmp/$name" "$_qpid_cache/$name" 2>/dev/null || [ -d "$_qpid_cache/$name" ] || {
        echo "run.sh: cannot move $name into $_qpid_cache" >&2; rm -rf "$tmp"; exit 2; }
    rm -rf "$tmp"
}

py2=$(_find_python2)
if [ -z "$py2" ]; then
    echo "run.sh: no Python 2.7 (set PYTHON2, or: pyenv install 2.7.18)" >&2
    exit 2
fi
mkdir -p "$_qpid_cache"
_qpid_fetch "$_QPID_PYTHON" "$_QPID_PYTHON_SHA"
_qpid_fetch "$_QPID_TOOLS" "$_QPID_TOOLS_SHA"
qpid_python=$_qpid_cache/$_QPID_PYTHON
qpid_tools=$_qpid_cache/$_QPID_TOOLS
