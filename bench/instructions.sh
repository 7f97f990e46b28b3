#!/usr/bin/env bash
# Instructions per operation of `lamina bench`'s read benchmarks, for lamina
# and the peers built into the same binary, counted by callgrind: a measure
# the machine's load does not change (perf's hardware counters are not
# available on this virtual machine). See bench/read-path.md.
#
# For each engine, one database of NUM keys is made at native speed
# (`--benchmarks fillrandom`, then `readrandom` in a second process, the
# flags of compare.sh) and closed. Then, for
# each benchmark, two runs on fresh copies of it under callgrind
# (`--use_existing_db --reads R` and `--reads 2R`); the benchmark thread's
# instructions of the second minus the first, divided by R, are the
# marginal instructions per operation: opening the database and the tables
# and warming the block cache cancel out. An operation is one seek with its
# nexts (seekrandom), one get (readrandom) or one entry (readseq,
# readreverse).
#
# Usage: bench/instructions.sh
#
# Environment:
#   NUM=2000000          keys
#   ENGINES="lamina leveldb"
#   RUNS="seekrandom:20000 readrandom:20000 readseq:400000 readreverse:400000"
#                        benchmark:R
#   SEEK_NEXTS=10
#   VERIFY_CHECKSUMS=    --verify_checksums=true|false for every engine (empty:
#                        no flag, the binary's default; binaries before the
#                        flag verified in lamina and RocksDB, not in LevelDB)
#   EXTRA_FLAGS=         more flags for every engine (e.g. --mmap_read)
#   LAMINA=target/release/lamina   the binary (built with the peers' features)
#   REUSE_BASE=          a WORKDIR of an earlier run whose databases to copy
#                        (the same data for a before/after comparison)
#   WORKDIR=/tmp/lamina-instructions   databases and callgrind files; deleted
#                        on a later run only if it carries this script's mark
set -euo pipefail

NUM=${NUM:-2000000}
ENGINES=${ENGINES:-lamina leveldb}
RUNS=${RUNS:-seekrandom:20000 readrandom:20000 readseq:400000 readreverse:400000}
SEEK_NEXTS=${SEEK_NEXTS:-10}
VERIFY_CHECKSUMS=${VERIFY_CHECKSUMS:-}
EXTRA_FLAGS=${EXTRA_FLAGS:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAMINA=${LAMINA:-$REPO/target/release/lamina}
WORKDIR=${WORKDIR:-/tmp/lamina-instructions}

log() { printf '== %s\n' "$*" >&2; }

command -v valgrind >/dev/null || { log "valgrind is needed"; exit 1; }
[ -x "$LAMINA" ] || { log "no lamina binary at $LAMINA"; exit 1; }

MARK=.lamina-instructions-workdir
if [ -e "$WORKDIR" ]; then
    if [ ! -f "$WORKDIR/$MARK" ]; then
        log "$WORKDIR exists and was not created by this script; set WORKDIR to another path"
        exit 1
    fi
    rm -rf "$WORKDIR"
fi
mkdir -p "$WORKDIR"
: >"$WORKDIR/$MARK"

# shellcheck disable=SC2206 # EXTRA_FLAGS is split on purpose
FLAGS=(
    --num="$NUM"
    --key_size=16
    --value_size=100
    --write_buffer_size=67108864
    --bloom_bits=10
    --memtable_bloom_bits=10
    --cache_size=8388608
    --block_size=4096
    --compression_type=none
    --sync=false
    --threads=1
    --seek_nexts="$SEEK_NEXTS"
    ${VERIFY_CHECKSUMS:+--verify_checksums="$VERIFY_CHECKSUMS"}
    --seed=301
    $EXTRA_FLAGS
)

# The instructions of the thread that ran the benchmark: callgrind writes
# one file per thread; the benchmark's is the one naming its function.
bench_thread_instructions() {
    local prefix=$1 fn=$2 f
    for f in "$prefix"-*; do
        if grep -q "$fn" "$f"; then
            awk '/^summary:/ { print $2 }' "$f"
            return
        fi
    done
    log "no thread of $prefix ran $fn"
    exit 1
}

printf 'engine\tbenchmark\treads\tinstructions\tall_threads\n' >"$WORKDIR/counts.tsv"
for eng in $ENGINES; do
    base="$WORKDIR/base-$eng"
    if [ -n "${REUSE_BASE:-}" ] && [ -d "$REUSE_BASE/base-$eng" ]; then
        log "$eng: copying the database of $REUSE_BASE"
        cp -r "$REUSE_BASE/base-$eng" "$base"
    else
        log "$eng: fillrandom of $NUM keys, then readrandom (compare.sh's order)"
        "$LAMINA" bench --engine "$eng" "${FLAGS[@]}" --benchmarks=fillrandom --db="$base" \
            >"$WORKDIR/fill-$eng.log"
        # Natively, as compare.sh runs it: the engine's background work
        # after the fill (LevelDB's compactions) finishes here, not during
        # the counted runs.
        "$LAMINA" bench --engine "$eng" "${FLAGS[@]}" --use_existing_db \
            --benchmarks=readrandom --reads="$NUM" --db="$base" >>"$WORKDIR/fill-$eng.log"
    fi
    for run in $RUNS; do
        b=${run%%:*}
        r=${run##*:}
        case "$b" in
        seekrandom) fn=seek_random ;;
        readrandom) fn=read_random ;;
        readseq | readreverse) fn=read_seq ;;
        *) log "unsupported benchmark $b"; exit 1 ;;
        esac
        for reads in "$r" $((2 * r)); do
            db="$WORKDIR/db-$eng"
            rm -rf "$db"
            cp -r "$base" "$db"
            out="$WORKDIR/cg-$eng-$b-$reads"
            log "$eng: $b --reads $reads under callgrind ($(uptime | sed 's/.*load/load/'))"
            valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" \
                "$LAMINA" bench --engine "$eng" "${FLAGS[@]}" --use_existing_db \
                --benchmarks="$b" --reads="$reads" --db="$db" \
                >"$out.log" 2>"$out.err"
            n=$(bench_thread_instructions "$out" "$fn")
            # Every thread's, to show background work that ran meanwhile.
            all=$(cat "$out"-* | awk '/^summary:/ { s += $2 } END { printf "%.0f", s }')
            printf '%s\t%s\t%s\t%s\t%s\n' "$eng" "$b" "$reads" "$n" "$all" >>"$WORKDIR/counts.tsv"
        done
        rm -rf "$WORKDIR/db-$eng"
    done
done

python3 - "$WORKDIR/counts.tsv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {}
for r in rows:
    by.setdefault((r["engine"], r["benchmark"]), []).append(
        (int(r["reads"]), int(r["instructions"]), int(r["all_threads"])))
print("| engine | benchmark | instructions per op (marginal) | all threads per op |")
print("| --- | --- | ---: | ---: |")
for (eng, b), pts in by.items():
    (r1, i1, a1), (r2, i2, a2) = sorted(pts)
    print(f"| {eng} | {b} | {(i2 - i1) / (r2 - r1):,.0f} | {(a2 - a1) / (r2 - r1):,.0f} |")
PY
