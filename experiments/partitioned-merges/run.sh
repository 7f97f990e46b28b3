#!/usr/bin/env bash
# Seed 000 §5.5 (partitioned stack-based merges) at this machine's scale:
# No-partition, Size, Local-Range and Global-Range on a tiered stack with
# both stop styles, plus leveling, over four key sets; then the costs of
# StreamHist and the lambda key image and Table 5.1. Writes
# experiments/partitioned-merges/results/{summary.json,results.md,costs.txt},
# or results-quick/ with --quick (never over the committed full results).
# Usage: experiments/partitioned-merges/run.sh [--quick]   (--quick: seconds)
set -euo pipefail
cd "$(dirname "$0")/../.."
case " $* " in
*" --quick "*) OUT=${OUT:-experiments/partitioned-merges/results-quick} ;;
*) OUT=${OUT:-experiments/partitioned-merges/results} ;;
esac
mkdir -p "$OUT"
cargo build --release -q -p lamina-experiment --example partitioned_merges
cargo build --release -q -p lamina-compaction --example partition_costs
target/release/examples/partitioned_merges "$OUT" "$@"
target/release/examples/partition_costs "$@" | tee "$OUT/costs.txt"
