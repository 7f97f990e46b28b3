#!/usr/bin/env bash
# Times `lamina sim` for every policy under several settings at two flush
# counts, and prints the ratio of the times: a simulation linear in its
# flushes takes about N2/N1 times as long (a little more as the tree
# deepens); a policy or setting far above that does superlinear work, in
# the simulator or in the modelled system (docs/simulator.md; the rounds in
# docs/notes/2026-11-simulator-speed-rounds.md). Work is counted by
# tests/linear.rs; this finds what to count.
#
#   scripts/sim-scaling.sh LAMINA [N1 N2]
#
# N1 and N2 default to 4000 and 16000; POLICIES="a b" replaces the list of
# policies and SETTINGS (one per line) the list of settings. Prints one
# line per policy and setting: policy | setting | user s at N1 | at N2 |
# ratio, with "ERROR: ..." for a run that failed or took over 300 s.
# Writes nothing but a temporary file it removes.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 LAMINA [N1 N2]" >&2
    exit 2
fi
lamina=$1
n1=${2:-4000}
n2=${3:-16000}

# shellcheck disable=SC2054 # commas belong to the specs
policies=(
    leveling blsm lsbm tiered:b=4 leveled:b0=2,b=4 binomial:k=4
    minlatency:k=4 bigtable:k=4 exploring:k=4 constant:k=4 concurrent
    nomerge full lo1 lo2 rr cold old tsd tsa tier smtree 1-leveling
    lazy-leveling tiered leveled lazy-leveled partial
    binomial:k=4,partition=size binomial:k=4,partition=local
    bigtable:k=4,partition=global tiered:b=4,partition=size
    concurrent:partition=size
)
if [[ -n ${POLICIES:-} ]]; then
    read -r -a policies <<<"$POLICIES"
fi
default_settings='
--keys sequential
--dup-ratio 0.3
--flush-uniform 500,1500 --buffer-bytes 1000
--file-overhead 10 --flush-size 1000
--size-ratio 4
--flush-size 10000 --buffer-bytes 1000
--merge-cost 0.5 --merge-threads 2 --stall-runs 20
--wa paper --transient --format csv'
mapfile -t settings <<<"${SETTINGS:-$default_settings}"

times=$(mktemp)
trap 'rm -f "$times"' EXIT

# User CPU seconds of one simulation, or ERROR and the first words it said.
run() {
    local flushes=$1 policy=$2 setting=$3 format="--format none" err
    [[ $setting == *--format* ]] && format=""
    # shellcheck disable=SC2086 # the setting is a list of options
    if err=$(timeout 300 /usr/bin/time -o "$times" -f %U \
        "$lamina" sim --policy "$policy" --flushes "$flushes" $format $setting 2>&1 >/dev/null); then
        tail -1 "$times"
    else
        echo "ERROR: ${err:0:80}" | tr '\n' ' '
    fi
}

for p in "${policies[@]}"; do
    for s in "${settings[@]}"; do
        t1=$(run "$n1" "$p" "$s")
        t2=$(run "$n2" "$p" "$s")
        ratio=$(awk -v a="$t1" -v b="$t2" 'BEGIN {
            if (a + 0 != a || b + 0 != b) print "-";
            else printf "%.1f", b / (a < 0.02 ? 0.02 : a) }')
        echo "$p | ${s:-defaults} | $t1 | $t2 | $ratio"
    done
done
