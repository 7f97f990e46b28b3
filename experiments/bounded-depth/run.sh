#!/usr/bin/env bash
# Bounded-depth merge policies: seed 003 Table I by simulation and on the
# engine, and seed 000 Fig. 3.12 by simulation. See README.md beside this file.
#
#   experiments/bounded-depth/run.sh            # everything (up to an hour: leveled in Fig. 3.12)
#   experiments/bounded-depth/run.sh table-sim  # Table I, model simulator (seconds)
#   experiments/bounded-depth/run.sh table-engine   # Table I, engine flat out, k = 4, 6, 8
#   experiments/bounded-depth/run.sh table-lockstep # Table I, engine in lockstep with the model
#   experiments/bounded-depth/run.sh fig        # Fig. 3.12 a-c (minutes: leveled)
#   experiments/bounded-depth/run.sh fig36      # Fig. 3.6, transient space amplification (seconds)
#   experiments/bounded-depth/run.sh observed   # engine runs for Figs. 3.5-3.11 (about 10 minutes idle)
#   experiments/bounded-depth/run.sh figures    # Figs. 3.5-3.11 from those runs (results/figures.md)
#   experiments/bounded-depth/run.sh report     # results/table1.md from the CSVs
#   experiments/bounded-depth/run.sh --quick observed figures   # small runs into results-quick/
#
# Environment: FIG_PANELS ("a b c": the panels of Fig. 3.12), ENGINE_FLUSHES (3000), ENGINE_BUFFER (32768 bytes of memtable),
# OBS_FLUSHES (1000 flushes per observed insert-only run), SKIP_BUILD=1,
# WORKDIR (/tmp/lamina-bounded-depth, engine databases).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
QUICK=0
if [ "${1:-}" = --quick ]; then
    QUICK=1
    shift
fi
RESULTS="$HERE/results"
[ "$QUICK" = 1 ] && RESULTS="$HERE/results-quick"
LAMINA="${CARGO_TARGET_DIR:-$REPO/target}/release/lamina"
EXAMPLE="${CARGO_TARGET_DIR:-$REPO/target}/release/examples/bounded_depth"
ENGINE_FLUSHES=${ENGINE_FLUSHES:-3000}
ENGINE_BUFFER=${ENGINE_BUFFER:-32768}
WORKDIR=${WORKDIR:-/tmp/lamina-bounded-depth}
POLICIES=(bigtable binomial exploring minlatency)
TABLE_KS=(3 4 5 6 7 8 10)
TABLE_BS=(4 8 16 32)
ENGINE_KS=(4 6 8)
TABLE_NS="1000 3000 5000 10000 20000"

log() { printf '== %s\n' "$*" >&2; }

build() {
    if [ "${SKIP_BUILD:-0}" != 1 ]; then
        (cd "$REPO" && cargo build --release -p lamina-cli -p lamina-experiment --bin lamina --example bounded_depth)
    fi
}

# Keeps the CSV rows of `lamina sim` at the flush counts of Table I, with the
# base name of the policy and k as columns (specs with commas are quoted).
keep_rows() {
    python3 -c '
import csv, sys
keep = {int(n) for n in sys.argv[2].split()}
rows = csv.reader(sys.stdin)
next(rows)
for policy, flush, wa, runs, avg in rows:
    if int(flush) in keep:
        name, params = policy.split(":", 1)
        params = dict(p.split("=") for p in params.split(","))
        k = params.get("k") or params["b"]  # k, or B for tiered and leveled
        print(f"{sys.argv[1]},{name},{k},{flush},{wa},{runs},{avg}")
' "$1" "$TABLE_NS"
}

# Table I (and seed 000 Tables A.1-A.2, which add Tiered and Leveled with
# B in {4, 8, 16, 32}, two SSTables in level 0) by simulation, with the
# tables' own definition of write amplification: all bytes written to
# create SSTables (each flush's own SSTable and every merge output) over
# the bytes flushed (--wa engine; seed 003 §V-C, seed 000 §3.4.3): unit
# flushes (constant), and flush sizes uniform in [0.75, 1.25] of the unit
# (AsterixDB's flushes were not exactly equal).
table_sim() {
    mkdir -p "$RESULTS"
    local out="$RESULTS/table1-sim.csv" specs=() p k b
    for p in "${POLICIES[@]}"; do
        for k in "${TABLE_KS[@]}"; do specs+=(--policy "$p:k=$k"); done
    done
    for b in "${TABLE_BS[@]}"; do specs+=(--policy "tiered:b=$b" --policy "leveled:b0=2,b=$b"); done
    echo "flush_sizes,policy,k,n,write_amplification,sorted_runs,avg_sorted_runs" >"$out"
    log "Table I, simulated, constant flushes"
    "$LAMINA" sim "${specs[@]}" --wa engine --flushes 20000 --every 1000 --flush-size 1048576 |
        keep_rows constant >>"$out"
    log "Table I, simulated, uniform flushes in [0.75, 1.25] MiB"
    "$LAMINA" sim "${specs[@]}" --wa engine --flushes 20000 --every 1000 \
        --flush-uniform 786432,1310720 --seed 3 |
        keep_rows uniform >>"$out"
}

# Table I on the engine: fillseq (unique keys, as the model's append-only
# workload) with a small memtable, about ENGINE_FLUSHES flushes per run.
# Merges run in the background while writes continue, as in AsterixDB.
table_engine() {
    mkdir -p "$RESULTS" "$WORKDIR"
    local out="$RESULTS/table1-engine.csv" p k json num
    # 16-byte keys, 100-byte values: about 186 bytes of memtable per entry.
    num=$((ENGINE_FLUSHES * ENGINE_BUFFER / 186))
    echo "policy,k,flushes,write_amplification,avg_sorted_runs,max_runs_at_flush,overshoot_flushes,max_overshoot,compactions,seconds" >"$out"
    for k in "${ENGINE_KS[@]}"; do
        for p in "${POLICIES[@]}"; do
            json="$WORKDIR/$p-$k.json"
            log "engine $p:k=$k, $num puts, memtable $ENGINE_BUFFER B"
            local start end
            start=$(date +%s.%N)
            "$LAMINA" bench --benchmarks=fillseq --num="$num" --write_buffer_size="$ENGINE_BUFFER" \
                --compaction="$p:k=$k" --db="$WORKDIR/db" --destroy_db --stats-json="$json" >&2
            end=$(date +%s.%N)
            python3 - "$json" "$p" "$k" "$start" "$end" >>"$out" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]},{sys.argv[3]},{s['flushes']},{s['write_amplification']:.4f},"
      f"{s['avg_sorted_runs']:.4f},{s['max_runs_at_flush']},{s['overshoot_flushes']},"
      f"{s['max_overshoot']},{s['compactions']},{float(sys.argv[5]) - float(sys.argv[4]):.1f}")
EOF
        done
    done
    rm -rf "$WORKDIR/db"
}

# Table I on the engine in lockstep with the model: each flush waits for the
# previous one's merges (the model's assumption), on the in-memory
# filesystem; the ignored test table1_engine_lockstep in
# crates/lamina-sim/tests/engine.rs.
table_lockstep() {
    mkdir -p "$RESULTS"
    local out="$RESULTS/table1-lockstep.csv"
    echo "policy,k,flushes,write_amplification,avg_sorted_runs,model_write_amplification,model_avg_sorted_runs,diverged_flushes" >"$out"
    (cd "$REPO" && cargo test --release -p lamina-sim --test engine table1_engine_lockstep \
        -- --ignored --nocapture) | sed -n 's/^table1,//p' >>"$out"
}

# Seed 000 Fig. 3.12: simulated WA over 10^5 flushes (k = 6, 7) and 10^6
# (k = 10), with tiered and leveled sized to similar read amplification.
# Leveled works per file and needs minutes for 10^5 flushes and hours for
# 10^6, so in (c) it is simulated for 10^5 flushes in a separate run.
fig() {
    mkdir -p "$RESULTS"
    local k n tb lb specs
    for row in "6 100000 2 9 a" "7 100000 2 6 b" "10 1000000 2 4 c"; do
        read -r k n tb lb tag <<<"$row"
        # FIG_PANELS="a b" redraws some panels only.
        case " ${FIG_PANELS:-a b c} " in *" $tag "*) ;; *) continue ;; esac
        specs=()
        for p in bigtable binomial constant exploring minlatency; do specs+=(--policy "$p:k=$k"); done
        specs+=(--policy "tiered:b=$tb")
        if [ "$tag" != c ]; then specs+=(--policy "leveled:b0=2,b=$lb"); fi
        log "Fig. 3.12$tag: k=$k, $n flushes"
        "$LAMINA" sim "${specs[@]}" --wa paper --flushes "$n" --every $((n / 100)) --time \
            --plot "$RESULTS/fig3.12$tag.svg" --plot-log >"$RESULTS/fig3.12$tag.csv"
        if [ "$tag" = c ]; then
            log "Fig. 3.12c: leveled:b0=2,b=$lb for 100000 flushes"
            "$LAMINA" sim --policy "leveled:b0=2,b=$lb" --wa paper --flushes 100000 --every 1000 --time \
                >"$RESULTS/fig3.12c-leveled.csv"
        fi
    done
}

# Seed 000 Fig. 3.6: the highest transient space amplification (largest
# total size during a flush's merges / bytes flushed so far) of the
# stack-based policies with k = 4 or B = 4 and of Leveled with B = 32, over
# 20,000 unit flushes; also the flush where it happened and the highest
# after the first 1,000 flushes.
fig36() {
    mkdir -p "$RESULTS"
    local specs=()
    for p in binomial bigtable exploring minlatency; do specs+=(--policy "$p:k=4"); done
    specs+=(--policy "tiered:b=4" --policy "leveled:b0=2,b=32")
    log "Fig. 3.6: transient space amplification, 20000 flushes"
    "$LAMINA" sim "${specs[@]}" --flushes 20000 --transient | python3 -c '
import csv, sys
rows = csv.DictReader(sys.stdin)
best = {}
for r in rows:
    p, t, x = r["policy"], int(r["flush"]), float(r["transient_space_amplification"])
    b = best.setdefault(p, [0.0, 0, 0.0])
    if x > b[0]:
        b[0], b[1] = x, t
    if t > 1000:
        b[2] = max(b[2], x)
print("policy,max_transient_space_amplification,at_flush,max_after_flush_1000")
for p, (m, t, late) in best.items():
    print(f"\"{p}\",{m:.4f},{t},{late:.4f}")
' >"$RESULTS/fig3.6.csv"
    cat "$RESULTS/fig3.6.csv" >&2
}

# Seed 000 Figs. 3.5-3.11 on the engine (lamina::Db on the in-memory
# filesystem, one merge thread, no WAL, every flush's merges done before the
# next flush): hashed inserts for every
# bounded-depth policy with k in 3..10 and Tiered/Leveled with B in 4..32
# (Figs. 3.5, 3.6, 3.9-3.11), 1.5x the writes with 70% latest-skewed updates
# (Fig. 3.7: k = 6 and B in 4..32), and Leveled with ordered inserts, with
# and without updates (Fig. 3.8). Each run leaves PREFIX.{json,flushes.csv,
# merges.csv} in results/observed/.
observed() {
    local out="$RESULTS/observed" flushes=${OBS_FLUSHES:-1000} ks=(3 4 5 6 7 8 10) bs=(4 8 16 32)
    local buffer=32768 value=1000 p k b ops
    if [ "$QUICK" = 1 ]; then
        flushes=200 ks=(4 7) bs=(4 32)
    fi
    # A write takes its value, an 8-byte key and about 40 bytes of memtable
    # bookkeeping.
    ops=$((flushes * buffer / (value + 48)))
    mkdir -p "$out"
    run1() { # spec workload ops
        local name
        name=$(printf '%s' "$1-$2" | tr ':,=' '_-_')
        "$EXAMPLE" engine --policy "$1" --workload "$2" --ops "$3" --buffer "$buffer" \
            --value "$value" --out "$out/$name"
    }
    log "observed: $ops writes per insert-only run (about $flushes flushes); $(uptime)"
    local start=$SECONDS
    # Two streams at once: a run mostly waits for its merges to be
    # scheduled, and the machine has two cores.
    (
        for p in "${POLICIES[@]}"; do
            for k in "${ks[@]}"; do run1 "$p:k=$k" hashed "$ops"; done
        done
    ) &
    (
        for b in "${bs[@]}"; do
            run1 "tiered:b=$b" hashed "$ops"
            run1 "leveled:b0=2,b=$b" hashed "$ops"
        done
        for p in "${POLICIES[@]}"; do run1 "$p:k=6" updates $((ops * 3 / 2)); done
        for b in "${bs[@]}"; do
            run1 "tiered:b=$b" updates $((ops * 3 / 2))
            run1 "leveled:b0=2,b=$b" updates $((ops * 3 / 2))
            run1 "leveled:b0=2,b=$b" ordered-updates $((ops * 3 / 2))
            run1 "leveled:b0=2,b=$b" ordered "$ops"
        done
    ) &
    wait
    log "observed: $((SECONDS - start)) s; $(uptime)"
}

# Figs. 3.5-3.11 as SVG and results/figures.md from the observed runs, the
# paper's tables and the simulated Table I.
figures() {
    "$EXAMPLE" report "$RESULTS" "$HERE/paper-table1.csv" "$HERE/results/table1-sim.csv"
    log "wrote $RESULTS/figures.md and fig3.{5,6,7,8,9,10,11}.svg"
}

report() {
    python3 "$HERE/report.py" "$HERE/paper-table1.csv" "$RESULTS/table1-sim.csv" \
        "$RESULTS/table1-engine.csv" "$RESULTS/table1-lockstep.csv" >"$RESULTS/table1.md"
    log "wrote $RESULTS/table1.md"
}

if [ "$QUICK" = 1 ] && [ $# -eq 0 ]; then
    set -- observed figures
fi
[ $# -eq 0 ] && set -- all
built=0
need_build() { if [ "$built" = 0 ]; then build; built=1; fi; }
for what in "$@"; do
    case "$what" in
    table-sim) need_build; table_sim ;;
    table-engine) need_build; table_engine ;;
    table-lockstep) table_lockstep ;;
    fig) need_build; fig ;;
    fig36) need_build; fig36 ;;
    observed) need_build; observed ;;
    figures) need_build; figures ;;
    report) report ;;
    all) need_build; table_sim; table_engine; table_lockstep; fig; fig36; observed; figures; report ;;
    *) echo "usage: $0 [--quick] [all|table-sim|table-engine|table-lockstep|fig|fig36|observed|figures|report]..." >&2; exit 2 ;;
    esac
done
