#!/usr/bin/env bash
# Every seed 001 figure this experiment reproduces, by run.sh:
#   Fig. 4(a)-(h)   the nine strategies, ingestion then lookups and scans
#                   (results-deep/, or results-quick/ with --quick);
#   Fig. 8(d)-(f)   10% deletes: full, lo1, tsd, tsa at two persistence
#                   thresholds, tier (results-deletes/);
#   Fig. 8(a)-(c)   update-to-insert ratio 2 and 8 for full, lo1, lo2, tier
#                   (results-updates-R/; ratio 0 is Fig. 4's run);
#   Fig. 5          existing-key lookups interleaved with the second half of
#                   the ingestion against the same lookups after it, for
#                   full, lo1, tier (results-fig5-interleaved/, -serial/).
# --quick runs each at the quick scale into results-quick*/ (a minute or
# two in all); the default takes about 40 minutes on this shared machine.
# Usage: experiments/design-space/run-all.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")"
Q=()
R=experiments/design-space/results
N=1000000
# TSA thresholds and the persistence threshold counted, in ms.
T25=10000
T50=20000
if [ "${1:-}" = "--quick" ]; then
  Q=(--quick)
  R=$R-quick
  N=200000
  T25=1000
  T50=2000
fi
# Fig. 4 (run.sh's own default directory).
./run.sh "${Q[@]}"
# Fig. 8(d)-(f): the TSA thresholds are about 25% and 50% of the deep
# run's ingestion time (TSA33 and TSA50); every run counts the deletes
# persisted within the smaller one.
OUT=$R-deletes MIN_LEVELS=0 QUERIES="" \
  STRATEGIES="full lo1 tsd tsa:threshold=$T25 tsa:threshold=$T50 tier" \
  KNOBS="priority=1 deletes=0.1 persist_ms=$T25" ./run.sh "${Q[@]}"
# Fig. 8(a)-(c).
for u in 2 8; do
  OUT=$R-updates-$u MIN_LEVELS=0 QUERIES="" STRATEGIES="full lo1 lo2 tier" \
    KNOBS="priority=1 updates=$u" ./run.sh "${Q[@]}"
done
# Fig. 5: 10% of the inserts' count in existing-key lookups.
L=$((N / 10))
OUT=$R-fig5-interleaved MIN_LEVELS=0 QUERIES="" STRATEGIES="full lo1 tier" \
  KNOBS="priority=1 interleave=$L" ./run.sh "${Q[@]}"
OUT=$R-fig5-serial MIN_LEVELS=0 QUERIES="lookups=$L alpha=0" STRATEGIES="full lo1 tier" \
  KNOBS="priority=1" ./run.sh "${Q[@]}"
