#!/usr/bin/env bash
# Seed 002 Fig. 11 with the writer's pace as the knob: for each system of
# SYSTEMS (leveling; blsm and lsbm with 128 KiB files merged in 1 MiB
# super-file units) and each writer rate of RATES (updates/s), a tree is
# filled (150,000 random 1 KB inserts, at the device's speed), then runs
# 180 s of RangeHot reads (8 threads, 64 MiB cache, 10 ms per seeking
# read) with the writer at that rate. Our levels turn over about 100x faster than the paper's
# while a miss costs the same 10 ms, so a slower writer gives the cache
# the paper's time to refill between rounds. Writes RESULTS/SYSTEM-wRATE.*,
# summary.json, results.md and the charts.
# Usage: [RATES=250,500] experiments/lsbm/dilation.sh   (about 20 minutes)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-experiments/lsbm/results-dilation}
RATES=${RATES:-250,1000}
SYSTEMS=${SYSTEMS:-leveling,blsm,lsbm}
cargo build --release -q -p lamina-cli -p lamina-experiment --bin lamina --example lsbm_report
mkdir -p "$OUT"
# Scratch on tmpfs where there is one; only this directory is deleted.
SCRATCH=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/lamina-dilation.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
COMMON=(--num=150000 --value_size=1000 --write_buffer_size=1048576
        --cache_size=67108864 --bloom_bits=15)
for rate in ${RATES//,/ }; do
    for sys in ${SYSTEMS//,/ }; do
        case $sys in
            leveling) spec="leveling:T=10,l0=1" ;;
            blsm) spec="blsm:T=10,l0=1,file=131072,unit=8" ;;
            lsbm) spec="lsbm:T=10,l0=1,file=131072,unit=8,trim=3000,keep=0.8" ;;
            *) echo "unknown system $sys" >&2; exit 2 ;;
        esac
        echo "== $sys $rate updates/s, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        target/release/lamina bench --db "$SCRATCH/run" --benchmarks=fillrandom "${COMMON[@]}" \
            --compaction="$spec" > "$OUT/$sys-w$rate.fill.txt"
        target/release/lamina bench --db "$SCRATCH/run" --use_existing_db --benchmarks=mixedhot \
            "${COMMON[@]}" --threads=8 --duration=180 --write_rate="$rate" \
            --read_dist=rangehot:0.15:0.98 --compaction="$spec" --read_miss_latency_us=10000 \
            --timeseries="$OUT/$sys-w$rate.csv" --stats-json="$OUT/$sys-w$rate.json" \
            > "$OUT/$sys-w$rate.txt"
        rm -rf "${SCRATCH:?}/run"
    done
done
dists=$(echo "$RATES" | sed 's/\([0-9]\+\)/w\1/g')
target/release/examples/lsbm_report "$OUT" 60 "$SYSTEMS" "$dists"
