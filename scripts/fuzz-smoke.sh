#!/usr/bin/env bash
# Runs every cargo-fuzz (libFuzzer) target of fuzz/ for SECONDS each
# (default 25), starting from the committed seed corpus, and prints a table
# of executions per target. New corpus entries go to a scratch directory, so
# the committed corpus stays as it is; a crash fails the script and leaves
# the input in fuzz/artifacts/<target>/.
#
#   scripts/fuzz-smoke.sh [SECONDS] [TARGET...]
#
# Stable Rust only: RUSTC_BOOTSTRAP=1 unlocks the sanitizer flags cargo-fuzz
# passes. Installs cargo-fuzz if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-25}
shift || true
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
# libfuzzer-sys compiles libFuzzer (C++).
command -v c++ >/dev/null || { apt-get update && apt-get install -y g++; }
cargo fuzz build
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf '%-14s %12s %8s %10s\n' target executions seconds exec/s
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t"
    log="$scratch/$t.log"
    if ! cargo fuzz run "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1; then
        tail -n 40 "$log"
        echo "fuzz target $t failed (input in fuzz/artifacts/$t/)" >&2
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
    printf '%-14s %12s %8s %10s\n' "$t" "$runs" "$took" "$(( runs / (took > 0 ? took : 1) ))"
done
echo "fuzz: ${#targets[@]} passed, 0 failed"
