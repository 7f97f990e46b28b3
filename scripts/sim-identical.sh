#!/usr/bin/env bash
# Checks that two builds of `lamina sim` print byte-identical results:
# every flush's record (CSV with --transient) and the summary (JSON: write
# amplification, merge and move counts, files, the final tree's run sizes
# per level), for every policy, at each flush count given, with the default
# model and with duplicates and uneven flush sizes. Use it before and after
# a change to the simulator, the planner or a policy that must not change
# results:
#
#   scripts/sim-identical.sh OLD/lamina NEW/lamina [FLUSHES...]
#
# FLUSHES defaults to 10000 30000; POLICIES="a b" replaces the list of
# policies.
# Writes only under a temporary directory it removes; exits 1 on the first
# difference, naming the policy and the options.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 OLD_LAMINA NEW_LAMINA [FLUSHES...]" >&2
    exit 2
fi
old=$1
new=$2
shift 2
counts=("${@:-10000 30000}")
read -r -a counts <<<"${counts[*]}"

# shellcheck disable=SC2054 # commas belong to the specs
policies=(
    leveling blsm lsbm tiered leveled binomial:k=4 minlatency:k=4 bigtable:k=5
    exploring:k=5 constant:k=4 concurrent:k=4 nomerge full lo1 lo2 rr cold old
    tsd tsa tier 1-leveling lazy-leveling lazy-leveled partial smtree
    leveled:b0=2,b=4 tiered:b=4
)
if [[ -n ${POLICIES:-} ]]; then
    read -r -a policies <<<"$POLICIES"
fi
variants=("" "--dup-ratio 0.3 --flush-uniform 500000,1500000 --seed 7")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for n in "${counts[@]}"; do
    for p in "${policies[@]}"; do
        for v in "${variants[@]}"; do
            # shellcheck disable=SC2086 # the variant is a list of options
            for format in "csv --transient" json; do
                "$old" sim --policy "$p" --flushes "$n" $v --format $format >"$work/old"
                "$new" sim --policy "$p" --flushes "$n" $v --format $format >"$work/new"
                if ! cmp -s "$work/old" "$work/new"; then
                    echo "DIFFERENT: $p, $n flushes, ${v:-default model}, --format $format" >&2
                    diff "$work/old" "$work/new" | head -5 >&2
                    exit 1
                fi
            done
        done
        echo "identical: $p, $n flushes"
    done
done
