#!/usr/bin/env bash
# Runs the same db_bench workload on LevelDB (Debian's libleveldb-dev,
# through bench/peers/leveldb/ldb_bench.cc) and on `lamina bench`,
# alternating LevelDB, lamina, LevelDB, lamina, ... for ROUNDS rounds, and
# prints the median micros/op and ops/sec of each benchmark with the
# lamina/LevelDB throughput ratio. See bench/README.md.
#
# Environment:
#   NUM=2000000          keys (and writes) per run
#   ROUNDS=2             rounds; each round runs LevelDB then lamina
#   BENCHMARKS=fillrandom,readrandom,seekrandom   (the driver also runs
#                        fillseq, overwrite, readseq, readreverse, deleterandom)
#   SEED=301             --seed passed to both
#   WORKDIR=/tmp/lamina-peer-leveldb   databases and logs (logs/ is kept)
#   EXTRA_FLAGS=         more flags passed to both (e.g. --threads=2)
#   SKIP_BUILD=1         do not run cargo build (the driver is always built)
set -euo pipefail

NUM=${NUM:-2000000}
ROUNDS=${ROUNDS:-2}
BENCHMARKS=${BENCHMARKS:-fillrandom,readrandom,seekrandom}
SEED=${SEED:-301}
WORKDIR=${WORKDIR:-/tmp/lamina-peer-leveldb}
EXTRA_FLAGS=${EXTRA_FLAGS:-}
# shellcheck source=bench/peers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

missing=()
[ -f /usr/include/leveldb/db.h ] || missing+=(libleveldb-dev)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi
log "LevelDB: $(dpkg-query -W -f='${Version}' libleveldb-dev 2>/dev/null || echo 'version unknown')"

build_lamina
LDB_BENCH="$TARGET_DIR/peers/ldb_bench"
mkdir -p "$(dirname "$LDB_BENCH")"
log "building $LDB_BENCH"
g++ -O2 -std=c++17 -o "$LDB_BENCH" "$REPO/bench/peers/leveldb/ldb_bench.cc" -lleveldb -lpthread

set_flags
init_results

for ((r = 1; r <= ROUNDS; r++)); do
    run_engine leveldb "$r" "$LDB_BENCH"
    run_engine lamina "$r" "$LAMINA" bench --stats-json="$LOGS/lamina.$r.stats.json"
done

print_table leveldb
echo "logs: $LOGS"
