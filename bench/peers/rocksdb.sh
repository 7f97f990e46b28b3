#!/usr/bin/env bash
# Runs the same db_bench workload on RocksDB (Debian's rocksdb-tools) and on
# `lamina bench`, alternating RocksDB, lamina, RocksDB, lamina, ... for ROUNDS
# rounds, and prints the median micros/op and ops/sec of each benchmark with
# the lamina/RocksDB throughput ratio. See bench/README.md.
#
# Environment:
#   NUM=2000000          keys (and writes) per run
#   ROUNDS=2             rounds; each round runs RocksDB then lamina
#   BENCHMARKS=fillrandom,readrandom,seekrandom
#   SEED=301             --seed passed to both
#   WORKDIR=/tmp/lamina-peer-rocksdb   databases and logs (logs/ is kept)
#   EXTRA_FLAGS=         more flags passed to both (e.g. --threads=2)
#   DB_BENCH=            path of RocksDB's db_bench (found or installed if unset)
#   SKIP_BUILD=1         do not run cargo build
set -euo pipefail

NUM=${NUM:-2000000}
ROUNDS=${ROUNDS:-2}
BENCHMARKS=${BENCHMARKS:-fillrandom,readrandom,seekrandom}
SEED=${SEED:-301}
WORKDIR=${WORKDIR:-/tmp/lamina-peer-rocksdb}
EXTRA_FLAGS=${EXTRA_FLAGS:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}

log() { printf '== %s\n' "$*" >&2; }

find_db_bench() {
    local c
    for c in db_bench rocksdb_db_bench; do
        if command -v "$c" >/dev/null 2>&1; then
            command -v "$c"
            return 0
        fi
    done
    if command -v dpkg >/dev/null 2>&1; then
        c=$(dpkg -L rocksdb-tools 2>/dev/null | grep -E '/bin/[^/]*db_bench$' | head -n1 || true)
        if [ -n "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return 0
        fi
    fi
    return 1
}

if [ -z "${DB_BENCH:-}" ]; then
    if ! DB_BENCH=$(find_db_bench); then
        log "db_bench not found: installing rocksdb-tools"
        SUDO=""
        if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
        $SUDO apt-get update
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y rocksdb-tools
        DB_BENCH=$(find_db_bench) || { log "rocksdb-tools installed no db_bench"; exit 1; }
    fi
fi
log "RocksDB: $DB_BENCH ($(dpkg-query -W -f='${Version}' rocksdb-tools 2>/dev/null || echo 'version unknown'))"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building lamina (release)"
    (cd "$REPO" && cargo build --release -p lamina-cli)
fi
LAMINA="$TARGET_DIR/release/lamina"
[ -x "$LAMINA" ] || { log "no lamina binary at $LAMINA"; exit 1; }

# The shared workload. Both tools accept db_bench's --name=value syntax.
# shellcheck disable=SC2206 # EXTRA_FLAGS is split on purpose
FLAGS=(
    --benchmarks="$BENCHMARKS"
    --num="$NUM"
    --key_size=16
    --value_size=100
    --write_buffer_size=67108864
    --bloom_bits=10
    --compression_type=none
    --cache_size=8388608
    --seed="$SEED"
    $EXTRA_FLAGS
)

LOGS="$WORKDIR/logs"
rm -rf "$WORKDIR"
mkdir -p "$LOGS"
RESULTS="$LOGS/results.tsv" # engine, round, benchmark, micros/op, ops/sec
: >"$RESULTS"

# Appends the result lines of log $2 for engine $1, round $3 to $RESULTS.
collect() {
    awk -v eng="$1" -v round="$3" '
        $2 == ":" && $4 == "micros/op" && $6 ~ /^ops\/sec/ {
            printf "%s\t%s\t%s\t%s\t%s\n", eng, round, $1, $3, $5
        }' "$2" >>"$RESULTS"
}

run_rocksdb() {
    local db="$WORKDIR/rocksdb" out="$LOGS/rocksdb.$1.log"
    rm -rf "$db"
    log "round $1: rocksdb ${FLAGS[*]}"
    "$DB_BENCH" "${FLAGS[@]}" --db="$db" >"$out" 2>"$LOGS/rocksdb.$1.err"
    grep -E 'micros/op' "$out" >&2 || true
    collect rocksdb "$out" "$1"
    rm -rf "$db"
}

run_lamina() {
    local db="$WORKDIR/lamina" out="$LOGS/lamina.$1.log"
    rm -rf "$db"
    log "round $1: lamina bench ${FLAGS[*]}"
    "$LAMINA" bench "${FLAGS[@]}" --db="$db" --stats-json="$LOGS/lamina.$1.stats.json" \
        >"$out" 2>"$LOGS/lamina.$1.err"
    grep -E 'micros/op' "$out" >&2 || true
    collect lamina "$out" "$1"
    rm -rf "$db"
}

for ((r = 1; r <= ROUNDS; r++)); do
    run_rocksdb "$r"
    run_lamina "$r"
done

# Median of the numbers on stdin.
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan"; exit }
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo
echo "NUM=$NUM ROUNDS=$ROUNDS key_size=16 value_size=100 write_buffer_size=64MiB bloom_bits=10 cache_size=8MiB compression=none ${EXTRA_FLAGS}"
printf '%-18s %14s %14s %14s %14s %10s\n' benchmark "rocksdb us/op" "lamina us/op" "rocksdb ops/s" "lamina ops/s" "lamina/rdb"
IFS=',' read -r -a NAMES <<<"$BENCHMARKS"
for b in "${NAMES[@]}"; do
    [ "$b" = stats ] && continue
    rm_us=$(awk -F'\t' -v b="$b" '$1 == "rocksdb" && $3 == b { print $4 }' "$RESULTS" | median)
    lm_us=$(awk -F'\t' -v b="$b" '$1 == "lamina" && $3 == b { print $4 }' "$RESULTS" | median)
    rm_ops=$(awk -F'\t' -v b="$b" '$1 == "rocksdb" && $3 == b { print $5 }' "$RESULTS" | median)
    lm_ops=$(awk -F'\t' -v b="$b" '$1 == "lamina" && $3 == b { print $5 }' "$RESULTS" | median)
    ratio=$(awk -v a="$lm_ops" -v b="$rm_ops" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "n/a" }')
    printf '%-18s %14s %14s %14.0f %14.0f %10s\n' "$b" "$rm_us" "$lm_us" "$rm_ops" "$lm_ops" "$ratio"
done
echo "(medians over $ROUNDS rounds; lamina/rdb = lamina ops/sec / RocksDB ops/sec, > 1 means lamina is faster)"
if grep -q 'Assertions are enabled' "$LOGS"/rocksdb.*.log "$LOGS"/rocksdb.*.err 2>/dev/null; then
    echo "note: this db_bench build reports 'Assertions are enabled; benchmarks unnecessarily slow'"
fi
echo "logs: $LOGS"
