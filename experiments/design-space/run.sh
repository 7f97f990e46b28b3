#!/usr/bin/env bash
# Seed 001 Fig. 4 on this machine: the nine strategies of its Table 2
# ingesting uniform random inserts of 128-byte entries (4-byte keys,
# 124-byte values), T = 10, 10 bits per key, one compaction thread
# (crates/lamina/examples/design_space.rs, which also waits for the
# compactions to settle), then point lookups at six fractions of empty
# lookups and range scans at four selectivities. Writes one stats JSON per
# strategy, tabulates them (summarize.py: results.md) and draws the figure
# (design_space_report: fig4.svg, fig4-queries.svg).
#
# The default is the deep tree: 1M inserts into 64 KiB buffers and files
# with a 1 MiB block cache (0.8% of the data, the paper's 8 MB is 0.6% of
# its 1.28 GB) gives four disk levels, with compactions given priority over
# writes as in the paper (priority=1). --quick: 200k inserts into 16 KiB
# buffers, also four levels, in seconds per strategy; the summary checks
# the shape (every strategy, at least four disk levels).
#
# Usage: experiments/design-space/run.sh [--quick] [INSERTS]
# Environment: STRATEGIES (names, or NAME:PARAMS such as
# tsa:threshold=10000), OUT, BUFFER, CACHE, RATIO (size ratio T, default
# 10), QUERIES (the query knobs; set but empty: none), KNOBS (extra KEY=VALUE knobs of the example, e.g.
# "priority=0", "deletes=0.1", "ingest=zipf" or "value=28"), MIN_LEVELS
# (0 skips the shape check of a partial run).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--quick" ]; then
  shift
  N=${1:-200000}
  BUFFER=${BUFFER:-16384}
  CACHE=${CACHE:-262144}
  QUERIES=${QUERIES-"lookups=2000 scans=10"}
  OUT=${OUT:-experiments/design-space/results-quick}
else
  N=${1:-1000000}
  BUFFER=${BUFFER:-65536}
  CACHE=${CACHE:-1048576}
  QUERIES=${QUERIES-"lookups=50000 scans=50"}
  OUT=${OUT:-experiments/design-space/results-deep}
fi
STRATEGIES=${STRATEGIES:-"full lo1 lo2 rr cold old tsd tsa tier"}
RATIO=${RATIO:-10}
KNOBS=${KNOBS:-"priority=1"}
MIN_LEVELS=${MIN_LEVELS:-4}
# Scratch on tmpfs when there is one: the engine fsyncs every flushed and
# compacted file, which on this shared disk made a 200k-insert run take
# 9.5 minutes instead of 11 s (identical byte and compaction counts).
BASE=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && BASE=/dev/shm
SCRATCH=$(mktemp -d -p "$BASE")
trap 'rm -rf "$SCRATCH"' EXIT
cargo build --release -q -p lamina-lsm --example design_space
mkdir -p "$OUT"
echo "load before: $(uptime)" > "$OUT/load.txt"
for s in $STRATEGIES; do
  # NAME or NAME:PARAMS (e.g. tsa:threshold=10000), saved as NAME@PARAMS.json.
  name=${s%%:*}
  params=${s#"$name"}
  params=${params#:}
  label=$name${params:+@$params}
  # shellcheck disable=SC2086 # knobs are separate arguments
  target/release/examples/design_space "$name:${params:+$params,}T=$RATIO,file=$BUFFER" "$N" \
    "$SCRATCH/db" buffer="$BUFFER" cache="$CACHE" $KNOBS $QUERIES > "$OUT/$label.json"
  echo "$label done: $(uptime)" | tee -a "$OUT/load.txt"
done
if [ "$MIN_LEVELS" -gt 0 ]; then
  python3 experiments/design-space/summarize.py "$OUT" "$N" --check "$MIN_LEVELS"
else
  python3 experiments/design-space/summarize.py "$OUT" "$N"
fi
cargo run --release -q -p lamina-experiment --example design_space_report -- "$OUT"
