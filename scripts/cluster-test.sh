#!/usr/bin/env bash
# The Jepsen-style fault test of a local 3-member cluster (issue 22):
# builds `lamina` in release, then `lamina cluster-test` starts three
# `lamina cluster` processes on 127.0.0.1 behind its own Raft proxy, runs
# concurrent clients while it SIGKILLs/restarts members and partitions the
# leader, and checks the history (per-key linearizability, no acknowledged
# write lost). The last line is `N faults, L lost, V violations, OPS ops`;
# the exit status is 1 if L or V is not 0 (the data and logs are then kept).
#
#   scripts/cluster-test.sh --faults 200 [--clients 5] [--keys 8] [--seed 1] [--shards 2] [--verbose]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p lamina-cli
dir="${TMPDIR:-/tmp}/lamina-cluster-test.$$"
exec target/release/lamina cluster-test --dir "$dir" "$@"
