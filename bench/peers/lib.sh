# Shared by the peer comparison scripts (rocksdb.sh, leveldb.sh): package
# installation, the lamina build, the common db_bench flags, running one
# engine and collecting its result lines, and the table of medians.
# Source it after setting PEER (the other engine's name) and the defaults.
#
# Environment read here:
#   NUM, BENCHMARKS, SEED, EXTRA_FLAGS, WORKDIR, SKIP_BUILD, CARGO_TARGET_DIR

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}

log() { printf '== %s\n' "$*" >&2; }

# apt-get installs the given Debian packages (with sudo when not root).
apt_install() {
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    log "installing $*"
    $sudo apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

# Builds lamina (unless SKIP_BUILD=1) and sets LAMINA to the binary.
build_lamina() {
    if [ "${SKIP_BUILD:-0}" != 1 ]; then
        log "building lamina (release)"
        (cd "$REPO" && cargo build --release -p lamina-cli)
    fi
    LAMINA="$TARGET_DIR/release/lamina"
    [ -x "$LAMINA" ] || { log "no lamina binary at $LAMINA"; exit 1; }
}

# The shared workload, in db_bench's --name=value syntax, as the FLAGS array.
set_flags() {
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
}

# Creates $WORKDIR/logs and an empty results file (engine, round, benchmark,
# micros/op, ops/sec per line).
init_results() {
    LOGS="$WORKDIR/logs"
    rm -rf "$WORKDIR"
    mkdir -p "$LOGS"
    RESULTS="$LOGS/results.tsv"
    : >"$RESULTS"
}

# run_engine ENGINE ROUND CMD...: runs CMD with FLAGS and --db=$WORKDIR/ENGINE
# on a fresh directory, logs to $LOGS/ENGINE.ROUND.{log,err} and collects
# the db_bench-style result lines.
run_engine() {
    local eng="$1" round="$2"
    shift 2
    local db="$WORKDIR/$eng" out="$LOGS/$eng.$round.log"
    rm -rf "$db"
    log "round $round: $eng ${FLAGS[*]}"
    "$@" "${FLAGS[@]}" --db="$db" >"$out" 2>"$LOGS/$eng.$round.err"
    grep -E 'micros/op' "$out" >&2 || true
    awk -v eng="$eng" -v round="$round" '
        $2 == ":" && $4 == "micros/op" && $6 ~ /^ops\/sec/ {
            printf "%s\t%s\t%s\t%s\t%s\n", eng, round, $1, $3, $5
        }' "$out" >>"$RESULTS"
    rm -rf "$db"
}

# Median of the numbers on stdin.
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan"; exit }
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# print_table PEER: per benchmark, the median micros/op and ops/sec of PEER
# and lamina and the ratio lamina ops/sec / PEER ops/sec.
print_table() {
    local peer="$1" b p_us l_us p_ops l_ops ratio
    echo
    echo "NUM=$NUM ROUNDS=$ROUNDS key_size=16 value_size=100 write_buffer_size=64MiB bloom_bits=10 cache_size=8MiB compression=none ${EXTRA_FLAGS}"
    printf '%-18s %14s %14s %14s %14s %10s\n' benchmark "$peer us/op" "lamina us/op" \
        "$peer ops/s" "lamina ops/s" "lamina/$peer"
    IFS=',' read -r -a NAMES <<<"$BENCHMARKS"
    for b in "${NAMES[@]}"; do
        [ "$b" = stats ] && continue
        p_us=$(awk -F'\t' -v e="$peer" -v b="$b" '$1 == e && $3 == b { print $4 }' "$RESULTS" | median)
        l_us=$(awk -F'\t' -v b="$b" '$1 == "lamina" && $3 == b { print $4 }' "$RESULTS" | median)
        p_ops=$(awk -F'\t' -v e="$peer" -v b="$b" '$1 == e && $3 == b { print $5 }' "$RESULTS" | median)
        l_ops=$(awk -F'\t' -v b="$b" '$1 == "lamina" && $3 == b { print $5 }' "$RESULTS" | median)
        ratio=$(awk -v a="$l_ops" -v b="$p_ops" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "n/a" }')
        printf '%-18s %14s %14s %14.0f %14.0f %10s\n' "$b" "$p_us" "$l_us" "$p_ops" "$l_ops" "$ratio"
    done
    echo "(medians over $ROUNDS rounds; lamina/$peer = lamina ops/sec / $peer ops/sec, > 1 means lamina is faster)"
}
