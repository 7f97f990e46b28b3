#!/usr/bin/env bash
# Every seed 001 figure this experiment reproduces, by run.sh:
#   fig4     Fig. 4(a)-(h): the nine strategies, ingestion then lookups and
#            scans (results-deep/, or results-quick/ with --quick);
#   deletes  Fig. 8(d)-(f): 10% deletes: full, lo1, tsd, tsa at two
#            persistence thresholds, tier (results-deletes/);
#   updates  Fig. 8(a)-(c): update-to-insert ratio 2 and 8 for full, lo1,
#            lo2, tier (results-updates-R/; ratio 0 is Fig. 4's run);
#   fig5     Fig. 5: existing-key lookups interleaved with the second half of
#            the ingestion against the same lookups after it, for full,
#            lo1, tier (results-fig5-interleaved/, -serial/);
#   fig6     Fig. 6: Zipfian (s = 1) and normal (σ = 34%) ingestion, uniform
#            lookups, nine strategies (results-ingest-zipf/, -normal/,
#            tabulated with Fig. 4's uniform run in results-sweeps/ingest.md);
#   fig7     Fig. 7: uniform ingestion, Zipfian and normal lookups
#            (results-lookup-zipf/, -normal/, results-sweeps/lookup.md);
#   size entry buffer page
#            Fig. 8(g)-(i) inserts, (j)-(k) entry size (4-byte keys, 4 to
#            252-byte values), (l)-(n) buffer (and file) size, (o) page
#            (block) size;
#   cache mixed ratio bpk
#            the appendix: block cache with inserts only (Fig. 10) and with
#            10% existing-key lookups interleaved (Fig. 11), size ratio
#            (Fig. 13), Bloom bits per key with lookups (Fig. 14);
#   meta meta-bpk
#            Fig. 4 (lookups: (e), (f), (h)) and Fig. 9(c, d), then Fig. 14,
#            with the tables' index and filter blocks in the block cache as
#            in the paper's RocksDB (cache_index_and_filter_blocks=1;
#            results-meta/, results-meta-bpk-V/, results-sweeps/meta-bpk.md).
# Each sweep runs SWEEP_STRATEGIES into results-SWEEP-VALUE/ and reuses
# Fig. 4's run for its default value (so fig4 runs first); sweep.py
# tabulates each in results-sweeps/SWEEP.md and checks its shape.
# --quick runs each at the quick scale into results-quick*/; without it
# the scale is Fig. 4's deep one (hours for everything on this machine).
# Usage: experiments/design-space/run-all.sh [--quick] [STEP...]
#   (default: every step, in the order above)
set -euo pipefail
cd "$(dirname "$0")/../.."
D=experiments/design-space
Q=()
R=$D/results
N=1000000
BUF=65536
CACHE=1048576
LOOKUPS=50000
# TSA thresholds and the persistence threshold counted, in ms.
T25=10000
T50=20000
if [ "${1:-}" = "--quick" ]; then
  shift
  Q=(--quick)
  R=$R-quick
  N=200000
  BUF=16384
  CACHE=262144
  LOOKUPS=2000
  T25=1000
  T50=2000
fi
BASE=$R
[ ${#Q[@]} -eq 0 ] && BASE=$R-deep
STEPS=${*:-fig4 deletes updates fig5 fig6 fig7 size entry buffer page cache mixed ratio bpk meta meta-bpk}
META="priority=1 cache_index_and_filter_blocks=1"
SWEEP_STRATEGIES=${SWEEP_STRATEGIES:-"full lo1 lo2 old tier"}
ALL="full lo1 lo2 rr cold old tsd tsa tier"

# sweep NAME KNOB "VALUES" [QUERIES] [KNOBS]: one run.sh per value of KNOB
# (an example knob, or N / BUFFER / CACHE / RATIO for run.sh's own) for
# STRATEGIES_OF_SWEEP (default SWEEP_STRATEGIES), then the table. The
# default value's point is Fig. 4's run ($BASE).
sweep() {
  local name=$1 knob=$2 values=$3 queries=${4:-} knobs=${5:-priority=1} points=() v
  local strategies=${STRATEGIES_OF_SWEEP:-$SWEEP_STRATEGIES} default
  case $knob in
    N) default=$N ;;
    BUFFER) default=$BUF ;;
    CACHE) default=$CACHE ;;
    RATIO) default=10 ;;
    value) default=124 ;;
    block) default=4096 ;;
    bpk) default=10 ;;
    ingest | lookup) default=uniform ;;
  esac
  # Fig. 4's run is the default point when the other knobs are its own.
  [ "$knobs" = priority=1 ] && points+=("$default=$BASE")
  for v in $values; do
    local out=$R-$name-$v n=$N envs=() k=$knobs
    case $knob in
      N) n=$v ;;
      BUFFER | CACHE | RATIO) envs=("$knob=$v") ;;
      *) k="$knobs $knob=$v" ;;
    esac
    env "${envs[@]}" OUT="$out" MIN_LEVELS=0 QUERIES="$queries" STRATEGIES="$strategies" \
      KNOBS="$k" $D/run.sh "${Q[@]}" "$n"
    points+=("$v=$out")
  done
  mkdir -p "$R-sweeps"
  python3 $D/sweep.py "$R-sweeps/$name.md" "$name" "$knob" --check "$strategies" "${points[@]}"
}

for step in $STEPS; do
  case $step in
    fig4) $D/run.sh "${Q[@]}" ;;
    deletes)
      # Fig. 8(d)-(f): the TSA thresholds are about 25% and 50% of the deep
      # run's ingestion time (TSA33 and TSA50); every run counts the deletes
      # persisted within the smaller one.
      OUT=$R-deletes MIN_LEVELS=0 QUERIES="" \
        STRATEGIES="full lo1 tsd tsa:threshold=$T25 tsa:threshold=$T50 tier" \
        KNOBS="priority=1 deletes=0.1 persist_ms=$T25" $D/run.sh "${Q[@]}" ;;
    updates)
      for u in 2 8; do
        OUT=$R-updates-$u MIN_LEVELS=0 QUERIES="" STRATEGIES="full lo1 lo2 tier" \
          KNOBS="priority=1 updates=$u" $D/run.sh "${Q[@]}"
      done ;;
    fig5)
      # 10% of the inserts' count in existing-key lookups.
      L=$((N / 10))
      OUT=$R-fig5-interleaved MIN_LEVELS=0 QUERIES="" STRATEGIES="full lo1 tier" \
        KNOBS="priority=1 interleave=$L" $D/run.sh "${Q[@]}"
      OUT=$R-fig5-serial MIN_LEVELS=0 QUERIES="lookups=$L alpha=0" STRATEGIES="full lo1 tier" \
        KNOBS="priority=1" $D/run.sh "${Q[@]}" ;;
    fig6) STRATEGIES_OF_SWEEP=$ALL sweep ingest ingest "zipf normal" "lookups=$LOOKUPS" ;;
    fig7) STRATEGIES_OF_SWEEP=$ALL sweep lookup lookup "zipf normal" "lookups=$LOOKUPS" ;;
    size) sweep size N "$((N / 4)) $((N / 2))" ;;
    entry) sweep entry value "4 28 252" ;;
    buffer) sweep buffer BUFFER "$((BUF / 2)) $((BUF * 4))" ;;
    page) sweep page block "512 1024 16384" ;;
    cache) sweep cache CACHE "$((CACHE / 4)) $((CACHE * 4)) $((CACHE * 16))" ;;
    mixed)
      sweep mixed CACHE "$((CACHE / 4)) $CACHE $((CACHE * 4)) $((CACHE * 16))" "" \
        "priority=1 interleave=$((N / 10))" ;;
    ratio) sweep ratio RATIO "4 6" ;;
    bpk) sweep bpk bpk "2 5 15" "lookups=$LOOKUPS" ;;
    meta) OUT=$R-meta KNOBS="$META" $D/run.sh "${Q[@]}" ;;
    meta-bpk) sweep meta-bpk bpk "2 5 10 15" "lookups=$LOOKUPS" "$META" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
