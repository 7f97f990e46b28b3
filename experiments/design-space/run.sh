#!/usr/bin/env bash
# Seed 001 Fig. 4(a)-(d) on this machine: the nine strategies of its Table 2
# ingesting uniform random inserts of 128-byte entries (4-byte keys,
# 124-byte values), T = 10, 8 MiB buffer and output files, 10 bits per key,
# 8 MiB block cache, one compaction thread (crates/lamina/examples/
# design_space.rs, which also waits for the compactions to settle). Writes
# one stats JSON per strategy, tabulates them (summarize.py:
# results/results.md) and draws Fig. 4 (design_space_report:
# results/fig4.svg).
# Usage: experiments/design-space/run.sh [INSERTS]   (default 2000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-2000000}
STRATEGIES=${STRATEGIES:-"full lo1 lo2 rr cold old tsd tsa tier"}
OUT=${OUT:-experiments/design-space/results}
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
cargo build --release -q -p lamina-lsm --example design_space
mkdir -p "$OUT"
for s in $STRATEGIES; do
  target/release/examples/design_space "$s:T=10,file=8388608" "$N" "$SCRATCH/db" > "$OUT/$s.json"
  echo "$s done"
done
python3 experiments/design-space/summarize.py "$OUT" "$N"
cargo run --release -q -p lamina-cli --example design_space_report -- "$OUT"
