#!/usr/bin/env bash
# Seed 001 Fig. 4(a)-(d) on this machine: the nine strategies of its Table 2
# ingesting uniform random inserts of 128-byte entries (4-byte keys,
# 124-byte values), T = 10, 8 MiB buffer and output files, 10 bits per key,
# 8 MiB block cache, one compaction thread. Writes one stats JSON per
# strategy (lamina bench --stats-json) and summarizes them (summarize.py:
# results.md, fig4.svg).
# Usage: experiments/design-space/run.sh [INSERTS]   (default 2000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-2000000}
STRATEGIES=${STRATEGIES:-"full lo1 lo2 rr cold old tsd tsa tier"}
OUT=experiments/design-space/results
WORK=${WORK:-/tmp/lamina-design-space}
cargo build --release -q -p lamina-cli
L=target/release/lamina
mkdir -p "$OUT"
for s in $STRATEGIES; do
  rm -rf "$WORK"
  start=$(date +%s.%N)
  $L bench --benchmarks=fillrandom --num="$N" --key_size=4 --value_size=124 \
    --write_buffer_size=8388608 --bloom_bits=10 --cache_size=8388608 \
    --compaction "$s:T=10,file=8388608" --db "$WORK" \
    --stats-json "$OUT/$s.json" > "$OUT/$s.txt"
  end=$(date +%s.%N)
  printf '%s: %.1f s\n' "$s" "$(echo "$end - $start" | bc -l)" | tee -a "$OUT/$s.txt"
done
rm -rf "$WORK"
python3 experiments/design-space/summarize.py "$OUT" "$N"
