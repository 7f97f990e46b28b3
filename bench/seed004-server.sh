#!/usr/bin/env bash
# The CS265 server against seed 004's C++ server (Ian Kelk's CS265 LSM tree)
# on one workload, each engine alone, alternating for ROUNDS rounds; every
# get reply checked against a replay of the workload (bench/cs265_oracle.py).
# See bench/servers.md, "lamina against the seed-004 server".
#
#   SEED004_SRC=DIR bench/seed004-server.sh     # DIR: a checkout of iankelk/lsm-tree
#
# Environment: SEED004_SRC (required; only read), ROUNDS (3), PUTS (1900000),
# GETS (1000000), DELETES (100000), MISSES (0.5, --gets-misses-ratio), SEED (7),
# WORKDIR (/tmp/lamina-seed004-server), PORT (7915, the seed server; lamina
# serve gets PORT+1), SEED004_FLAGS (more seed server flags), LAMINA_FLAGS
# (engine options for `lamina exec` and `lamina serve`), SKIP_INSTALL=1 (no
# apt-get), SKIP_BUILD=1 (no cargo build), LAMINA (the binary to measure;
# implies SKIP_BUILD).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
PUTS=${PUTS:-1900000}
GETS=${GETS:-1000000}
DELETES=${DELETES:-100000}
MISSES=${MISSES:-0.5}
SEED=${SEED:-7}
WORKDIR=${WORKDIR:-/tmp/lamina-seed004-server}
PORT=${PORT:-7915}
SEED004_FLAGS=${SEED004_FLAGS:-}
LAMINA_FLAGS=${LAMINA_FLAGS:-}
# shellcheck source=bench/peers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/peers/lib.sh"
ORACLE="$REPO/bench/cs265_oracle.py"

SRC=${SEED004_SRC:?set SEED004_SRC to a checkout of https://github.com/iankelk/lsm-tree}
for f in Makefile lsm/server.cpp lsm/client.cpp generator/generator.c; do
    [ -f "$SRC/$f" ] || { log "$SRC/$f is missing: SEED004_SRC is not the seed-004 repository"; exit 1; }
done

# The seed's README: g++ make libgsl-dev libboost-thread-dev nlohmann-json3-dev.
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
    missing=()
    command -v g++ >/dev/null 2>&1 || missing+=(g++)
    command -v make >/dev/null 2>&1 || missing+=(make)
    [ -f /usr/include/gsl/gsl_rng.h ] || missing+=(libgsl-dev)
    [ -f /usr/include/boost/thread.hpp ] || missing+=(libboost-thread-dev)
    [ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
    [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
fi

if [ -n "${LAMINA:-}" ]; then
    [ -x "$LAMINA" ] || { log "no lamina binary at $LAMINA"; exit 1; }
else
    build_lamina
fi

# WORKDIR holds only what this script makes; refuse a directory it did not.
MARK="$WORKDIR/.seed004-server-bench"
if [ -e "$WORKDIR" ] && [ ! -e "$MARK" ]; then
    log "$WORKDIR exists and was not made by this script; set WORKDIR elsewhere"
    exit 1
fi
mkdir -p "$WORKDIR" && touch "$MARK"
BUILD="$WORKDIR/seed004-build"

# The seed's release build (`make fast`, g++ -O3) and its generator, in a
# scratch copy of SEED004_SRC; rebuilt only when the sources changed.
stamp=$(cd "$SRC" && find Makefile lsm lib generator -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)
if [ ! -x "$BUILD/bin/server" ] || [ "$(cat "$BUILD/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$BUILD" && mkdir -p "$BUILD"
    tar -C "$SRC" --exclude=.git -cf - . | tar -C "$BUILD" -xf -
    log "building the seed-004 server and client (make fast) and generator (make generator)"
    (cd "$BUILD" && make fast >"$WORKDIR/seed004-build.log" 2>&1 &&
        make generator >>"$WORKDIR/seed004-build.log" 2>&1) ||
        { log "the seed-004 build failed: $WORKDIR/seed004-build.log"; exit 1; }
    echo "$stamp" >"$BUILD/.stamp"
fi
cc -O2 -Wall -o "$WORKDIR/seed004_client" "$REPO/bench/peers/seed004_client.c"

WL="$WORKDIR/workload.txt"
"$BUILD/bin/generator" --puts "$PUTS" --gets "$GETS" --deletes "$DELETES" \
    --gets-misses-ratio "$MISSES" --seed "$SEED" >"$WL" 2>"$WORKDIR/generator.log"
LINES=$(wc -l <"$WL")
# The seed server refuses the value -2147483648 (its tombstone) with a reply
# the oracle does not model; the seed's generator can draw it (p = 2^-32).
if grep -q -- ' -2147483648$' "$WL"; then
    log "the workload puts the value -2147483648 (the seed's tombstone); pick another SEED"
    exit 1
fi
log "workload: seed-004 generator --puts $PUTS --gets $GETS --deletes $DELETES --gets-misses-ratio $MISSES --seed $SEED: $LINES lines"

now() { date +%s.%N; }
# CPU seconds (user + system, every thread) a live process has used.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
# wait_for FILE PATTERN SECONDS: until PATTERN appears in FILE.
wait_for() {
    for _ in $(seq $(($3 * 20))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
    log "timed out after $3 s waiting for '$2' in $1"
    exit 1
}

RESULTS="$WORKDIR/results.tsv"  # mode, round, seconds, cpu seconds, wrong-get counts
: >"$RESULTS"
FIFO="$WORKDIR/seed-stdin"
[ -p "$FIFO" ] || mkfifo "$FIFO"

# The seed server on a fresh directory; its stdin is a FIFO nobody writes
# (it reads console commands from stdin, and spins on one at EOF).
start_seed() {
    rm -rf "$WORKDIR/seed-db" && mkdir -p "$WORKDIR/seed-db"
    # shellcheck disable=SC2086 # SEED004_FLAGS is split on purpose
    "$BUILD/bin/server" -p "$PORT" -d "$WORKDIR/seed-db" $SEED004_FLAGS <>"$FIFO" >"$WORKDIR/seed-server.log" 2>&1 &
    SERVER=$!
    wait_for "$WORKDIR/seed-server.log" "waiting for input" 60
}
stop_server() {
    kill "-$1" "$SERVER"
    wait "$SERVER" || true
    SERVER=""
}
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RESULTS"; }
# The oracle's counts for a replies file; a misaligned file stops the run.
check() {
    python3 "$ORACLE" "$WL" "$1" || { log "$1 does not line up with the workload's gets"; exit 1; }
}

# 1. The seed's batch-load command: `b FILE` runs the workload inside the
# server with no output, sent by the seed's own client. Its client prints the
# time from its connection to the reply, then may hang in recv(), so the time
# is that line's and the client is ended once it printed it.
seed_batch() {
    start_seed
    "$BUILD/bin/client" -q -p "$PORT" <<<"b $WL" >"$WORKDIR/seed-client.out" 2>&1 &
    local client=$! us
    wait_for "$WORKDIR/seed-client.out" "Processing the workload took" 3600
    us=$(sed -n 's/^Processing the workload took \([0-9]*\) microseconds.*/\1/p' "$WORKDIR/seed-client.out")
    local cpu
    cpu=$(cpu_of "$SERVER")
    kill "$client" 2>/dev/null || true
    wait "$client" 2>/dev/null || true
    stop_server INT
    [ -n "$us" ] || { log "the seed client reported no time"; exit 1; }
    record seed-batch "$1" "$(awk -v us="$us" 'BEGIN { printf "%.3f", us / 1e6 }')" "$cpu" "-"
}

# 2. The seed server answering one command at a time (seed004_client.c): the
# replies of every get, for the oracle.
seed_replies() {
    start_seed
    local start end cpu counts out="$WORKDIR/seed-replies.$1.txt"
    start=$(now)
    "$WORKDIR/seed004_client" "$PORT" <"$WL" >"$out"
    end=$(now)
    cpu=$(cpu_of "$SERVER")
    stop_server INT
    counts=$(check "$out")
    record seed-replies "$1" "$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }')" "$cpu" "$counts"
}

# 3. `lamina exec`: the embedded database, stdin to stdout.
lamina_exec() {
    local out="$WORKDIR/lamina-exec.$1.txt" t counts
    rm -rf "$WORKDIR/lamina-db"
    TIMEFORMAT='%R %U %S'
    # shellcheck disable=SC2086 # LAMINA_FLAGS is split on purpose
    t=$({ time "$LAMINA" exec --dir "$WORKDIR/lamina-db" $LAMINA_FLAGS <"$WL" >"$out" 2>"$WORKDIR/lamina-exec.err"; } 2>&1)
    counts=$(check "$out")
    record lamina-exec "$1" "$(awk '{ printf "%.3f", $1 }' <<<"$t")" "$(awk '{ printf "%.2f", $2 + $3 }' <<<"$t")" "$counts"
}

# 4. `lamina serve` with one `lamina client` piping the file (bench/server.sh).
lamina_server() {
    local out="$WORKDIR/lamina-client.$1.txt" start end cpu counts
    rm -rf "$WORKDIR/lamina-db"
    # shellcheck disable=SC2086 # LAMINA_FLAGS is split on purpose
    "$LAMINA" serve --dir "$WORKDIR/lamina-db" --port $((PORT + 1)) $LAMINA_FLAGS >"$WORKDIR/lamina-serve.log" 2>&1 &
    SERVER=$!
    wait_for "$WORKDIR/lamina-serve.log" listening 60
    start=$(now)
    "$LAMINA" client --port $((PORT + 1)) <"$WL" >"$out"
    end=$(now)
    cpu=$(cpu_of "$SERVER")
    stop_server TERM
    counts=$(check "$out")
    record lamina-serve "$1" "$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }')" "$cpu" "$counts"
}

SERVER=""
trap '[ -z "$SERVER" ] || kill -INT "$SERVER" 2>/dev/null || true' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
    log "round $r ($(uptime | sed 's/.*load/load/'))"
    if ((r % 2)); then
        seed_batch "$r"; lamina_exec "$r"; seed_replies "$r"; lamina_server "$r"
    else
        lamina_exec "$r"; seed_batch "$r"; lamina_server "$r"; seed_replies "$r"
    fi
done
rm -rf "$WORKDIR/seed-db" "$WORKDIR/lamina-db"

echo
echo "workload: $LINES lines (seed-004 generator: --puts $PUTS --gets $GETS --deletes $DELETES --gets-misses-ratio $MISSES --seed $SEED)"
echo "load after the run: $(uptime | sed 's/.*load/load/')"
echo
printf '%-13s %5s %9s %12s %9s  %s\n' mode round seconds lines/s cpu_s "oracle (server CPU for the servers)"
awk -F'\t' -v n="$LINES" '{ printf "%-13s %5s %9s %12.0f %9s  %s\n", $1, $2, $3, n / $3, $4, $5 }' "$RESULTS"
echo
printf '%-13s %15s %12s %15s\n' mode "median seconds" lines/s "median cpu_s"
for mode in seed-batch seed-replies lamina-exec lamina-serve; do
    s=$(awk -F'\t' -v m="$mode" '$1 == m { print $3 }' "$RESULTS" | median)
    c=$(awk -F'\t' -v m="$mode" '$1 == m { print $4 }' "$RESULTS" | median)
    printf '%-13s %15s %12.0f %15s\n' "$mode" "$s" "$(awk -v n="$LINES" -v s="$s" 'BEGIN { print n / s }')" "$c"
    eval "median_${mode//-/_}=$s cpu_${mode//-/_}=$c"
done
echo
# shellcheck disable=SC2154 # set by the eval above
awk -v sb="$median_seed_batch" -v le="$median_lamina_exec" -v ls="$median_lamina_serve" \
    -v csb="$cpu_seed_batch" -v cle="$cpu_lamina_exec" -v cls="$cpu_lamina_serve" 'BEGIN {
    printf "speed of lamina exec  / seed batch (median seconds, seed over lamina): %.2f; CPU seconds, seed over lamina: %.2f\n", sb / le, csb / cle
    printf "speed of lamina serve / seed batch (median seconds, seed over lamina): %.2f; server CPU seconds, seed over lamina: %.2f\n", sb / ls, csb / cls
}'
