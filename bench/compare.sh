#!/usr/bin/env bash
# Runs `lamina bench` on lamina and on every peer engine built into the same
# binary (RocksDB and LevelDB from source, release builds: features
# peer-rocksdb, peer-leveldb) with the same flags, in rotated order for
# ROUNDS rounds, each run on a fresh database, and prints per-round ops/s,
# the medians and the lamina/peer ratios as markdown, and all of it as JSON.
# See bench/README.md ("Peers in the harness").
#
# Usage: bench/compare.sh [--lz4]
#
#   --lz4    every engine compresses its blocks: --compression_type=lz4
#            (LevelDB has only Snappy and gets it; each run prints its mapping)
#
# Environment:
#   NUM=2000000        keys (and writes) per run
#   ROUNDS=3           rounds; round r starts with the r-th engine
#   BENCHMARKS=fillrandom,readrandom,seekrandom,readseq,readreverse,overwrite
#                      (readwhilewriting may be added: THREADS readers and one writer)
#   SEEK_NEXTS=10      entries read after each seek (seekrandom)
#   VERIFY_CHECKSUMS=true   --verify_checksums: every engine's reads check
#                      block checksums (ReadOptions::verify_checksums; false:
#                      LevelDB's default, true: RocksDB's and lamina's)
#   THREADS=1          --threads: client threads (readwhilewriting's readers)
#   ENGINES=           engines to run [default: lamina and every peer built in]
#   FEATURES=peer-rocksdb,peer-leveldb   cargo features of the build
#   SEED=301           --seed
#   EXTRA_FLAGS=       more flags for every engine (e.g. --reads=2000000)
#   WORKDIR=/tmp/lamina-compare (with --lz4: /tmp/lamina-compare-lz4)
#                      databases, logs, results.{tsv,md,json}
#   SKIP_BUILD=1       use the existing target/release/lamina
#   SKIP_INSTALL=1     do not install build tools with apt-get
set -euo pipefail

COMPRESSION=none
for arg in "$@"; do
    case "$arg" in
    --lz4) COMPRESSION=lz4 ;;
    *)
        echo "compare.sh: unknown argument $arg (see the header of this script)" >&2
        exit 2
        ;;
    esac
done

NUM=${NUM:-2000000}
ROUNDS=${ROUNDS:-3}
BENCHMARKS=${BENCHMARKS:-fillrandom,readrandom,seekrandom,readseq,readreverse,overwrite}
SEEK_NEXTS=${SEEK_NEXTS:-10}
VERIFY_CHECKSUMS=${VERIFY_CHECKSUMS:-true}
THREADS=${THREADS:-1}
FEATURES=${FEATURES:-peer-rocksdb,peer-leveldb}
SEED=${SEED:-301}
EXTRA_FLAGS=${EXTRA_FLAGS:-}
if [ "$COMPRESSION" = none ]; then
    WORKDIR=${WORKDIR:-/tmp/lamina-compare}
else
    WORKDIR=${WORKDIR:-/tmp/lamina-compare-$COMPRESSION}
fi
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
# RocksDB's build takes its CPU features from Rust's target features, which
# lamina's build leaves at the x86-64 baseline: without SSE4.2 RocksDB
# computes CRC32C in software (lamina's crc32c detects the instruction at
# run time). Only C++ compilations read CXXFLAGS.
if [ "$(uname -m)" = x86_64 ] && grep -qw sse4_2 /proc/cpuinfo; then
    export CXXFLAGS="${CXXFLAGS:--msse4.2 -mpclmul}"
fi

log() { printf '== %s\n' "$*" >&2; }

# The build tools of the C++ peers: a C++ compiler, cmake (LevelDB),
# libclang (the rocksdb crate's bindgen).
install_tools() {
    local missing=()
    command -v g++ >/dev/null 2>&1 || missing+=(g++)
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    if ! ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 &&
        ! ls /usr/lib/*/libclang*.so* >/dev/null 2>&1; then
        missing+=(libclang-dev)
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    log "installing ${missing[*]}"
    $sudo apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    [ "${SKIP_INSTALL:-0}" = 1 ] || install_tools
    log "building lamina with $FEATURES (release; the C++ peers take a while the first time)"
    (cd "$REPO" && cargo build --release -p lamina-cli --features "$FEATURES")
fi
LAMINA="$TARGET_DIR/release/lamina"
[ -x "$LAMINA" ] || { log "no lamina binary at $LAMINA"; exit 1; }

# The work directory is the script's own: created here and marked, and
# deleted on a later run only if it carries the mark.
MARK=.lamina-compare-workdir
if [ -e "$WORKDIR" ]; then
    if [ ! -f "$WORKDIR/$MARK" ]; then
        log "$WORKDIR exists and was not created by compare.sh; set WORKDIR to another path"
        exit 1
    fi
    rm -rf "$WORKDIR"
fi
mkdir -p "$WORKDIR/logs"
: >"$WORKDIR/$MARK"
LOGS="$WORKDIR/logs"
RESULTS="$WORKDIR/results.tsv"
printf 'engine\tround\tbenchmark\tmicros_per_op\tops_per_sec\tfound\n' >"$RESULTS"
SIZES="$WORKDIR/db_bytes.tsv"
printf 'engine\tround\tbytes\n' >"$SIZES"

if [ -z "${ENGINES:-}" ]; then
    ENGINES=lamina
    for peer in rocksdb leveldb fjall; do
        # A peer is available if this binary can open it.
        probe="$WORKDIR/probe-$peer"
        if "$LAMINA" bench --engine "$peer" --benchmarks=stats --num=1 --db="$probe" \
            >/dev/null 2>&1; then
            ENGINES="$ENGINES $peer"
        fi
        rm -rf "$probe"
    done
fi
read -r -a ENGINE_LIST <<<"$ENGINES"
log "engines: ${ENGINE_LIST[*]}"

# shellcheck disable=SC2206 # EXTRA_FLAGS is split on purpose
FLAGS=(
    --benchmarks="$BENCHMARKS"
    --num="$NUM"
    --key_size=16
    --value_size=100
    --write_buffer_size=67108864
    --bloom_bits=10
    --memtable_bloom_bits=10
    --cache_size=8388608
    --block_size=4096
    --compression_type="$COMPRESSION"
    --compression_ratio=0.5
    --sync=false
    --threads="$THREADS"
    --seek_nexts="$SEEK_NEXTS"
    --verify_checksums="$VERIFY_CHECKSUMS"
    --seed="$SEED"
    $EXTRA_FLAGS
)

{
    echo "date_start=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "uptime_start=$(uptime)"
    echo "nproc=$(nproc)"
    commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
    git -C "$REPO" diff --quiet HEAD 2>/dev/null || commit="$commit+uncommitted"
    echo "commit=$commit"
    echo "librocksdb_sys=$(awk '/^name = "librocksdb-sys"/ { getline; print $3 }' "$REPO/Cargo.lock" | tr -d '"')"
    echo "leveldb_sys=$(awk '/^name = "leveldb-sys"/ { getline; print $3 }' "$REPO/Cargo.lock" | tr -d '"')"
    echo "fjall=$(awk '/^name = "fjall"/ { getline; print $3 }' "$REPO/Cargo.lock" | tr -d '"')"
    echo "cxxflags=${CXXFLAGS:-}"
    echo "compression=$COMPRESSION"
    echo "verify_checksums=$VERIFY_CHECKSUMS"
    echo "flags=${FLAGS[*]}"
    echo "df_tmp=$(df -h "$WORKDIR" | awk 'NR == 2 { print $4 " free" }')"
} >"$WORKDIR/meta.txt"
log "load before: $(uptime)"

n=${#ENGINE_LIST[@]}
for ((round = 1; round <= ROUNDS; round++)); do
    for ((i = 0; i < n; i++)); do
        eng=${ENGINE_LIST[$(((i + round - 1) % n))]}
        db="$WORKDIR/db-$eng"
        out="$LOGS/$eng.$round.log"
        log "round $round/$ROUNDS: $eng"
        if ! "$LAMINA" bench --engine "$eng" "${FLAGS[@]}" --db="$db" >"$out" 2>"$LOGS/$eng.$round.err"; then
            log "$eng failed in round $round; see $out and $LOGS/$eng.$round.err"
            exit 1
        fi
        grep -E 'micros/op' "$out" >&2 || true
        awk -v eng="$eng" -v round="$round" '
            $2 == ":" && $4 == "micros/op" && $6 ~ /^ops\/sec/ {
                found = ""
                if (match($0, /\(([0-9]+) of [0-9]+ found\)/)) {
                    found = substr($0, RSTART + 1)
                    sub(/ of.*/, "", found)
                }
                printf "%s\t%s\t%s\t%s\t%s\t%s\n", eng, round, $1, $3, $5, found
            }' "$out" >>"$RESULTS"
        # The database's size after the last benchmark (WAL and all): what
        # compression saves, independent of the load.
        printf '%s\t%s\t%s\n' "$eng" "$round" "$(du -sb "$db" | cut -f1)" >>"$SIZES"
        rm -rf "$db"
    done
done

{
    echo "uptime_end=$(uptime)"
    echo "date_end=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >>"$WORKDIR/meta.txt"
log "load after: $(uptime)"

# The tables and the JSON from results.tsv and meta.txt.
python3 - "$WORKDIR" "$BENCHMARKS" "${ENGINE_LIST[@]}" <<'PY'
import csv, json, statistics, sys
workdir, benchmarks, engines = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
benchmarks = [b for b in benchmarks if b and b != "stats"]
meta = {}
for line in open(f"{workdir}/meta.txt"):
    k, _, v = line.rstrip("\n").partition("=")
    meta[k] = v
rows = list(csv.DictReader(open(f"{workdir}/results.tsv"), delimiter="\t"))
rounds = sorted({int(r["round"]) for r in rows})
ops = {}
found = {}
for r in rows:
    ops.setdefault((r["engine"], r["benchmark"]), {})[int(r["round"])] = float(r["ops_per_sec"])
    if r["found"]:
        found.setdefault((r["engine"], r["benchmark"]), {})[int(r["round"])] = int(r["found"])
med = {k: statistics.median(v.values()) for k, v in ops.items()}
peers = [e for e in engines if e != "lamina"]
fmt = lambda x: f"{x:,.0f}"
out = []
compression = meta["compression"]
if compression != "none" and "leveldb" in engines:
    compression += " (LevelDB: Snappy, its only compressor)"
out.append(f"NUM={meta['flags'].split('--num=')[1].split()[0]}, rounds={len(rounds)}, "
           f"compression {compression}, verify_checksums={meta['verify_checksums']}, "
           f"{meta['date_start']} .. {meta['date_end']}, commit {meta['commit']}")
out.append(f"load before: {meta['uptime_start'].strip()}")
out.append(f"load after:  {meta['uptime_end'].strip()}")
out.append("")
out.append("Per round (ops/s):")
out.append("")
out.append("| benchmark | engine | " + " | ".join(f"round {r}" for r in rounds) + " |")
out.append("| --- | --- |" + " ---: |" * len(rounds))
for b in benchmarks:
    for e in engines:
        v = ops.get((e, b), {})
        out.append(f"| {b} | {e} | " + " | ".join(fmt(v[r]) if r in v else "" for r in rounds) + " |")
out.append("")
out.append(f"Medians (ops/s) and ratios (lamina ops/s / peer ops/s; > 1: lamina is faster):")
out.append("")
out.append("| benchmark | " + " | ".join(engines) + " | " + " | ".join(f"lamina/{p}" for p in peers) + " |")
out.append("| --- |" + " ---: |" * (len(engines) + len(peers)))
ratios = {}
for b in benchmarks:
    cells = [fmt(med[(e, b)]) if (e, b) in med else "" for e in engines]
    rs = []
    for p in peers:
        if ("lamina", b) in med and (p, b) in med and med[(p, b)] > 0:
            ratio = med[("lamina", b)] / med[(p, b)]
            ratios[f"{b}/{p}"] = ratio
            rs.append(f"{ratio:.2f}")
        else:
            rs.append("")
    out.append(f"| {b} | " + " | ".join(cells) + " | " + " | ".join(rs) + " |")
sizes = {}
for r in csv.DictReader(open(f"{workdir}/db_bytes.tsv"), delimiter="\t"):
    sizes.setdefault(r["engine"], {})[int(r["round"])] = int(r["bytes"])
out.append("")
out.append("Database bytes after the last benchmark (`du -sb`, median of the rounds):")
out.append("")
out.append("| " + " | ".join(engines) + " |")
out.append("|" + " ---: |" * len(engines))
out.append("| " + " | ".join(fmt(statistics.median(sizes[e].values())) if e in sizes else "" for e in engines) + " |")
text = "\n".join(out) + "\n"
print(text)
open(f"{workdir}/results.md", "w").write(text)
doc = {
    "meta": meta,
    "engines": engines,
    "benchmarks": benchmarks,
    "ops_per_sec": {f"{e}/{b}": {str(r): v for r, v in sorted(x.items())} for (e, b), x in ops.items()},
    "found": {f"{e}/{b}": {str(r): v for r, v in sorted(x.items())} for (e, b), x in found.items()},
    "median_ops_per_sec": {f"{e}/{b}": v for (e, b), v in med.items()},
    "lamina_over_peer": ratios,
    "db_bytes": {e: {str(r): v for r, v in sorted(x.items())} for e, x in sizes.items()},
}
json.dump(doc, open(f"{workdir}/results.json", "w"), indent=2)
print(f"(also {workdir}/results.md and {workdir}/results.json; raw logs in {workdir}/logs)")
PY
