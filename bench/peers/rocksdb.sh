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
# shellcheck source=bench/peers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

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
        apt_install rocksdb-tools
        DB_BENCH=$(find_db_bench) || { log "rocksdb-tools installed no db_bench"; exit 1; }
    fi
fi
log "RocksDB: $DB_BENCH ($(dpkg-query -W -f='${Version}' rocksdb-tools 2>/dev/null || echo 'version unknown'))"

build_lamina
set_flags
init_results

for ((r = 1; r <= ROUNDS; r++)); do
    run_engine rocksdb "$r" "$DB_BENCH"
    run_engine lamina "$r" "$LAMINA" bench --stats-json="$LOGS/lamina.$r.stats.json"
done

print_table rocksdb
if grep -q 'Assertions are enabled' "$LOGS"/rocksdb.*.log "$LOGS"/rocksdb.*.err 2>/dev/null; then
    echo "note: this db_bench build reports 'Assertions are enabled; benchmarks unnecessarily slow'"
fi
echo "logs: $LOGS"
