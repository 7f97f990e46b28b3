#!/usr/bin/env bash
# Seed 004's experiments (CS265 final report §5) at this machine's scale:
#   fig1  compaction policies (tiered, leveled, lazy-leveled, partial c) with
#         a buffer 1/40 of the data, as the seed's 256 MiB buffer and 10 GiB;
#   fig1b where leveled and lazy-leveled write: both at a tenth of fig1's
#         puts (the same 1/40 ratio), with levels sized in the nominal
#         buffer and in the mean flush, keeping each merge's log line;
#   fig2  buffer sizes 0.5, 1, 2, 4 MiB (the seed's) and a large one, with
#         the sliding-window throughput of every run;
#   fig4  range queries on a thread pool (Options::scan_threads 1 to 10),
#         fanout 10 against 2, each over 18% of the keys (the seed's mean)
#         and over 0.1%, with no added latency and with an emulated 1 ms
#         seek ($SEEK us);
#   fig5  skewed gets: tiered against leveled, CPU cache misses counted by
#         cachegrind as the seed did, and block-cache misses;
#   fig6  Monkey against uniform Bloom bits at the same memory: measured
#         false positives and blocks read per get.
# Writes CSV/JSON under experiments/seed004/results/ (or $OUT), then
# results.md and the plots (summarize.py, seed004_report).
# Usage: experiments/seed004/run.sh [--quick] [fig1 fig1b fig2 fig4 fig5 fig6]
#   full: about 35 minutes on 2 idle cores; --quick: about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-experiments/seed004/results}
QUICK=false
if [[ "${1:-}" == "--quick" ]]; then
    QUICK=true
    shift
fi
FIGS=${*:-fig1 fig1b fig2 fig4 fig5 fig6}
# fig4: microseconds of an emulated seek (a read not continuing the last).
SEEK=${SEEK:-1000}
if $QUICK; then
    F1_PUTS=400000 F1_BUFFER=81920 F1B_PUTS=400000 F1B_BUFFER=81920 F2_PUTS=1000000 F2_BUFFERS="524288 1048576" F2_LARGE=8388608
    F4_PUTS=100000 F4_RANGES=10 F4_THREADS=1,2,3,4
    F5_OPS=20000 F6_PUTS=200000 F6_GETS=100000
else
    # fig1: 20M pairs (160 MB of 8-byte pairs) and a 4 MiB buffer: 1/40.
    F1_PUTS=20000000 F1_BUFFER=4194304
    # fig1b: 2M pairs, 400 KiB buffer (1/40 again).
    F1B_PUTS=2000000 F1B_BUFFER=409600
    # fig2: 50M pairs; the seed's large buffer was 256x its fastest one.
    F2_PUTS=50000000 F2_BUFFERS="524288 1048576 2097152 4194304" F2_LARGE=268435456
    # fig4: the seed's 1M puts and 100 ranges, threads 1 to 10.
    F4_PUTS=1000000 F4_RANGES=100 F4_THREADS=1,2,3,4,5,6,7,8,9,10
    F5_OPS=200000 F6_PUTS=4000000 F6_GETS=2000000
fi
cargo build --release -q -p lamina-lsm --example cs265_ingest --example cs265_range
cargo build --release -q -p lamina-experiment --example seed004_report
cargo build --release -q -p lamina-cli --bin lamina
L=target/release/lamina
mkdir -p "$OUT"
# Each run gets a directory under one this script creates; only that is deleted.
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/lamina-seed004.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)" > "$OUT/machine.txt"

ingest() { # NAME SPEC BUFFER PUTS [mean-flush]
    echo "== $1" >&2
    target/release/examples/cs265_ingest "$2" "$3" "$4" $(( $4 / 200 )) "$SCRATCH/db" \
        "$OUT/$1.series.csv" ${5:-} > "$OUT/$1.json"
}

for fig in $FIGS; do
case $fig in
fig1)
    for spec in tiered:T=10 leveled:T=10 lazy-leveled:T=10 partial:c=0.2,T=10 partial:c=0.5,T=10 partial:c=1,T=10; do
        ingest "fig1-${spec%%:*}-$(echo "${spec#*:}" | tr ',=' '__')" "$spec" "$F1_BUFFER" "$F1_PUTS"
    done
    ;;
fig1b)
    for p in leveled lazy-leveled; do
        ingest "fig1b-$p" "$p:T=10" "$F1B_BUFFER" "$F1B_PUTS"
        ingest "fig1b-$p-mean-flush" "$p:T=10" "$F1B_BUFFER" "$F1B_PUTS" mean-flush
    done
    ;;
fig2)
    for b in $F2_BUFFERS $F2_LARGE; do
        ingest "fig2-buffer-$b" tiered:T=10 "$b" "$F2_PUTS"
    done
    ;;
fig4)
    # The seed's smallest buffer was one 16 KiB page over 8-byte pairs; a
    # pair takes about 2.2x that in lamina's tables, so 32 KiB gives its
    # depths (3 levels at fanout 10, 8 at fanout 2). Each range covers 18%
    # of the key space: its 100 ranges returned 17,989,964 of 1M pairs.
    # Short ranges (0.1%: about 1,000 pairs) are bound by the seeks, one
    # per run and file they touch, rather than by the merge's CPU.
    for t in 10 2; do
        echo "== fig4-T$t" >&2
        target/release/examples/cs265_range tiered:T=$t 32768 "$F4_PUTS" "$F4_RANGES" 0.18 \
            "$F4_THREADS" "0,$SEEK" "$SCRATCH/db" > "$OUT/fig4-T$t.csv"
        echo "== fig4-short-T$t" >&2
        target/release/examples/cs265_range tiered:T=$t 32768 "$F4_PUTS" "$F4_RANGES" 0.001 \
            "$F4_THREADS" "0,$SEEK" "$SCRATCH/db" > "$OUT/fig4-short-T$t.csv"
    done
    ;;
fig5)
    # Equal puts and gets, half the gets of keys never put (the seed's
    # gets-misses ratio 0.5), hits skewed towards hot keys.
    $L gen --puts "$F5_OPS" --gets "$F5_OPS" --gets-misses-ratio 0.5 --gets-skewness 0.9 \
        --seed 5 > "$SCRATCH/fig5.dsl"
    echo stats-json >> "$SCRATCH/fig5.dsl"
    for spec in tiered:T=4 leveled:T=4; do
        name=fig5-${spec%%:*}
        echo "== $name" >&2
        # Plain run: throughput and block-cache counts.
        start=$(date +%s.%N)
        $L exec --dir "$SCRATCH/db" --buffer-bytes 65536 --compaction "$spec" \
            < "$SCRATCH/fig5.dsl" | tail -n 1 > "$OUT/$name.json"
        end=$(date +%s.%N)
        echo "{\"seconds\": $(awk "BEGIN { print $end - $start }")}" > "$OUT/$name.time.json"
        rm -rf "$SCRATCH/db"
        # The same run under cachegrind (the seed's tool): CPU cache misses.
        valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null \
            $L exec --dir "$SCRATCH/db" --buffer-bytes 65536 --compaction "$spec" \
            < "$SCRATCH/fig5.dsl" > /dev/null 2> "$OUT/$name.cachegrind.txt"
        rm -rf "$SCRATCH/db"
    done
    ;;
fig6)
    $L gen --puts "$F6_PUTS" --gets "$F6_GETS" --gets-misses-ratio 0.5 --seed 6 > "$SCRATCH/fig6.dsl"
    echo stats-json >> "$SCRATCH/fig6.dsl"
    # The seed's ratio (a 256 MiB buffer over a 1 GiB database: 1/4) and a
    # deeper tree (1/256), each with uniform bits and with Monkey at the
    # same memory (the seed's 10% error rate: about 4.8 bits per key).
    for ratio in 4 256; do
        buffer=$(( F6_PUTS * 16 / ratio ))
        for bloom in uniform monkey; do
            name=fig6-r$ratio-$bloom
            echo "== $name" >&2
            extra=()
            [ "$bloom" = monkey ] && extra=(--bloom-monkey)
            start=$(date +%s.%N)
            $L exec --dir "$SCRATCH/db" --buffer-bytes "$buffer" --compaction tiered:T=10 \
                --bloom-bits 4.8 "${extra[@]}" < "$SCRATCH/fig6.dsl" | tail -n 1 > "$OUT/$name.json"
            end=$(date +%s.%N)
            echo "{\"seconds\": $(awk "BEGIN { print $end - $start }")}" > "$OUT/$name.time.json"
            rm -rf "$SCRATCH/db"
        done
    done
    ;;
*) echo "unknown figure $fig (fig1 fig1b fig2 fig4 fig5 fig6)" >&2; exit 2 ;;
esac
done
python3 experiments/seed004/summarize.py "$OUT"
target/release/examples/seed004_report "$OUT"
