# bench/run.sh's `memory` section (sourced): broker memory per queued message, by ferryd's
# resident set, with $memory_messages (1,000,000) queued messages of 256 B and no consumer: transient ones held
# in memory, and persistent ones on a durable queue whose contents flow to disk. It runs
# crates/ferryd/tests/memory.rs (release build; each case starts a ferryd of its own), which
# appends one row per case to memory.csv through FERRY_MEMORY_CSV and fails if a case costs
# more than its limit (the row is written first, so the figure is still reported).

memory_header="case,messages,body,header,rss_per_message,beyond_content,goal,limit,seconds"

measure_memory() {
    echo "memory: $memory_messages queued 256 B messages, in memory and kept on disk"
    local raw=$out/raw/memory.txt
    local cmd=(cargo test --release --locked --manifest-path "$root/Cargo.toml" -p ferryd
        --test memory -- --ignored --nocapture --test-threads=1)
    log_cmd "FERRY_MEMORY_CSV=$out/memory.csv FERRY_MEMORY_MESSAGES=$memory_messages" "${cmd[@]}"
    if ! FERRY_MEMORY_CSV=$out/memory.csv FERRY_MEMORY_MESSAGES=$memory_messages timeout -k 5 600 "${cmd[@]}" >"$raw" 2>&1; then
        echo "  memory test failed: $(grep -m 2 -E 'panicked|error' "$raw" | tr '\n' ' ')" >&2
    fi
    grep '^memory \[' "$raw" | sed 's/^/  /' || true
}
