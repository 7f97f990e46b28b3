#!/usr/bin/env bash
# Seed 002 (LSbM) figures 11-17 at this machine's scale: every system
# (leveling, blsm, lsbm, smtree, blsm-kvcache, blsm-warmup) under the mixed workload with each read
# distribution (RangeHot point reads, Zipfian point reads, RangeHot range
# scans), on an emulated hard disk (10 ms per seeking read, the paper's
# HDD; off during the load and the warm-up). Level capacities follow the
# paper's shape: S_0 one memtable, S_i = S_0 * 10^i, so most data lives two
# levels down. Writes the per-second series, summary.json, results.md and
# the charts to experiments/lsbm/results/ (or $OUT).
# Usage: experiments/lsbm/run.sh [--quick]
#   full: about 33 minutes on 2 cores (LONG=600: about 50 minutes for
#   SYSTEMS=leveling,blsm,lsbm DISTS=rangehot); --quick: about 5 minutes,
#   written to experiments/lsbm/results-quick/ (never over the committed
#   results).
set -euo pipefail
cd "$(dirname "$0")/../.."
# Each run: load NUM records, run the mixed workload WARM seconds
# unrecorded at the device's speed (the cache fills in a second or two, the
# tree keeps changing at RATE), then record LONG (RangeHot point reads) or
# SHORT seconds (the others) on the emulated disk; means skip the first
# SKIP recorded seconds, while the readers settle on the slower disk.
if [[ "${1:-}" == "--quick" ]]; then
    # 20 MB of records over levels of 1.28, 12.8 and 128 MB (the default's
    # shape, data/S_2 = 1.6), the cache 30% of the data as the paper's.
    OUT=${OUT:-experiments/lsbm/results-quick}
    NUM=20000 BUFFER=131072 CACHE=${CACHE:-6291456} RATE=${RATE:-250}
    LONG=${LONG:-60} SHORT=${SHORT:-20} WARM=${WARM:-5} SKIP=${SKIP:-5}
    TRIM=${TRIM:-500} FILE=${FILE:-131072}
else
    OUT=${OUT:-experiments/lsbm/results}
    # 150 MB of records: S_1 = 10 MB, S_2 = 100 MB, the rest in level 3.
    # At 1,000 updates/s (1 MB/s) a level-1 round takes about 10 s and
    # level 2 turns over in about 100 s (the paper's runs last 20,000 s).
    # A 64 MiB block cache holds the 22 MB hot range with room to spare.
    NUM=150000 BUFFER=1048576 CACHE=${CACHE:-67108864} RATE=${RATE:-1000}
    TRIM=${TRIM:-3000} FILE=${FILE:-1048576}
    LONG=${LONG:-120} SHORT=${SHORT:-50} WARM=${WARM:-20} SKIP=${SKIP:-10}
fi
# Microseconds per seeking read: 10 ms by default, the paper's hard disk;
# SEEK=1000 is a faster one (the earlier runs' default).
SEEK=${SEEK:-10000}
# DIRECT=true reads the files with O_DIRECT (misses reach the device).
DIRECT=${DIRECT:-false}
SYSTEMS=${SYSTEMS:-leveling,blsm,lsbm,smtree,blsm-kvcache,blsm-warmup}
DISTS=${DISTS:-rangehot,rangescan,zipfian}
cargo build --release -q -p lamina-cli -p lamina-experiment --bin lamina --example lsbm_report
mkdir -p "$OUT"
# Each run gets a directory this script creates, and only those are deleted.
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/lamina-lsbm.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
# Buffer files of FILE bytes, merged UNIT at a time (the paper's
# super-file of UNIT files; the buffer keeps, trims and retires single
# files); LFILE: the leveling baseline's files (the paper's LevelDB has
# LSbM's 2 MB files, so FILE unless set); FREEZE and KEEP: lsbm's freeze
# and trim thresholds.
UNIT=${UNIT:-1}
LFILE=${LFILE:-$FILE}
FREEZE=${FREEZE:-0.9}
KEEP=${KEEP:-0.8}
spec() {
    case $1 in
        leveling) echo "leveling:T=10,l0=1" ;;
        blsm) echo "blsm:T=10,l0=1,file=$FILE,unit=$UNIT" ;;
        lsbm) echo "lsbm:T=10,l0=1,file=$FILE,unit=$UNIT,trim=$TRIM,keep=$KEEP,freeze=$FREEZE" ;;
        smtree) echo "smtree:T=10" ;;
        blsm-*) spec blsm ;;
    esac
}
# Memory beside the block cache: the KV-cache baseline splits the same
# memory in half (seed 002 §6: 3 GB row cache + 3 GB block cache); warm-up
# reads merged blocks into the block cache after each compaction.
caches() {
    case $1 in
        blsm-kvcache) echo "--cache_size=$((CACHE / 2)) --row_cache_size=$((CACHE / 2))" ;;
        blsm-warmup) echo "--cache_size=$CACHE --compaction_warm_up" ;;
        *) echo "--cache_size=$CACHE" ;;
    esac
}
for dist in ${DISTS//,/ }; do
    case $dist in
        rangehot) READ=(--read_dist=rangehot:0.15:0.98) DURATION=$LONG ;;
        zipfian) READ=(--read_dist=zipfian:0.999) DURATION=$SHORT ;;
        # 100 KB per scan, as the paper's range queries.
        rangescan) READ=(--read_dist=rangehot:0.15:0.98 --scan_entries=100) DURATION=$SHORT ;;
    esac
    for system in ${SYSTEMS//,/ }; do
        echo "== $system $dist" >&2
        target/release/lamina bench --db "$SCRATCH/$system-$dist" \
            --benchmarks=fillrandom,mixedhot --num=$NUM --value_size=1000 \
            --write_buffer_size=$BUFFER --target_file_size=$LFILE $(caches $system) --bloom_bits=15 \
            --threads=8 --warm_up_seconds=$WARM --duration=$DURATION --write_rate=$RATE "${READ[@]}" \
            --compaction="$(spec $system)" --read_miss_latency_us=$SEEK --direct_io=$DIRECT \
            --timeseries="$OUT/$system-$dist.csv" --stats-json="$OUT/$system-$dist.json" \
            > "$OUT/$system-$dist.txt"
        rm -rf "${SCRATCH:?}/$system-$dist"
    done
done
target/release/examples/lsbm_report "$OUT" $SKIP "$SYSTEMS" "$DISTS"
