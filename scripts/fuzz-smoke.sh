#!/usr/bin/env bash
# Runs every cargo-fuzz target briefly (FUZZ_SECONDS each, default 20) from the committed
# seeds. cargo-fuzz needs a nightly toolchain; it is installed if missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-20}

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz

for target in $(cargo +nightly fuzz list); do
  mkdir -p "corpus/$target"
  # Old artifacts are from earlier runs (and fixed bugs); only new ones count.
  rm -rf "artifacts/$target"
  seeds=()
  [[ -d "seeds/$target" ]] && seeds=("seeds/$target")
  echo "fuzzing $target for ${seconds}s"
  cargo +nightly fuzz run "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|Done)' || true
  # A crash leaves an artifact and makes cargo fuzz exit non-zero; pipefail would hide
  # that behind grep, so check for artifacts explicitly.
  if compgen -G "artifacts/$target/crash-*" >/dev/null; then
    echo "fuzz target $target crashed: see fuzz/artifacts/$target" >&2
    exit 1
  fi
done
