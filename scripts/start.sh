#!/usr/bin/env bash
# Builds ferryd (release) and starts it in the foreground on 127.0.0.1:5672.
#   scripts/start.sh                 start the broker (Ctrl-C stops it)
#   scripts/start.sh --perftest      start it in the background, run a quick perftest, stop it
# Extra arguments after `--` go to ferryd, e.g. scripts/start.sh -- --port 5673
set -euo pipefail
cd "$(dirname "$0")/.."

perftest=no
if [[ "${1:-}" == "--perftest" ]]; then perftest=yes; shift; fi
if [[ "${1:-}" == "--" ]]; then shift; fi

command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
cargo build --release --locked -p ferryd -p ferry-tools

if [[ $perftest == no ]]; then
  exec target/release/ferryd "$@"
fi

log=$(mktemp -t ferryd.XXXXXX.log)
# Authentication is on; a users file that does not exist leaves only the built-in guest/guest
# (loopback only), whatever users file the invoking user keeps.
nousers=$(mktemp -u -t ferry-no-users.XXXXXX)
coproc FERRYD { exec target/release/ferryd --port 0 --no-data-dir --users-file "$nousers" "$@" 2>"$log"; }
trap 'kill $FERRYD_PID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
read -r -t 10 port <&"${FERRYD[0]}" || { echo "ferryd did not start:" >&2; cat "$log" >&2; exit 1; }
echo "ferryd listening on 127.0.0.1:$port (log: $log)"
target/release/ferry perftest -b 127.0.0.1 -p "$port" --username guest --password guest \
  --count 100000 --size 256 --summary
