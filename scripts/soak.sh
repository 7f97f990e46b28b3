#!/usr/bin/env bash
# The soak, long version: `lamina serve` under 8 clients of mixed puts,
# gets, ranges and deletes for SECONDS (default 1800), sampling the
# server's RSS and the throughput every INTERVAL seconds (default 60);
# every reply is checked against the clients' oracles, and the data is read
# back at the end, after a restart, and checked with `lamina verify`.
#
#   scripts/soak.sh [SECONDS] [INTERVAL]
#
# The harness is crates/lamina-cli/tests/soak.rs (CI runs 20 s of it).
set -euo pipefail
cd "$(dirname "$0")/.."
LAMINA_SOAK_SECS=${1:-1800} LAMINA_SOAK_INTERVAL_SECS=${2:-60} \
    cargo test -q -p lamina-cli --test soak -- --ignored --exact soak_long --nocapture 2>&1 |
    grep -E '^soak|panicked|FAILED|test result'
