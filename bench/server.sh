#!/usr/bin/env bash
# End-to-end throughput of the CS265 server: one `lamina client` pipes a
# generated workload to `lamina serve` on loopback; the clock runs from the
# client's start to its exit (every reply received). See bench/README.md.
#
# Environment: PUTS (2000000), GETS (1000000), MISSES (0.5, share of gets on
# absent keys), SEED (7), ROUNDS (3), PORT (7912), WORKDIR
# (/tmp/lamina-server-bench), SERVE_FLAGS (more `lamina serve` flags),
# SKIP_BUILD=1, LAMINA (the binary to measure, for A/B runs; implies SKIP_BUILD).
set -euo pipefail

PUTS=${PUTS:-2000000}
GETS=${GETS:-1000000}
MISSES=${MISSES:-0.5}
SEED=${SEED:-7}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-7912}
WORKDIR=${WORKDIR:-/tmp/lamina-server-bench}
SERVE_FLAGS=${SERVE_FLAGS:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -n "${LAMINA:-}" ]; then SKIP_BUILD=1; fi
LAMINA=${LAMINA:-"${CARGO_TARGET_DIR:-$REPO/target}/release/lamina"}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    (cd "$REPO" && cargo build --release -q -p lamina-cli)
fi
rm -rf "$WORKDIR" && mkdir -p "$WORKDIR"
"$LAMINA" gen --puts "$PUTS" --gets "$GETS" --gets-misses-ratio "$MISSES" --seed "$SEED" \
    >"$WORKDIR/workload.txt"
ops=$(wc -l <"$WORKDIR/workload.txt")
echo "round,operations,seconds,ops_per_sec"
for ((r = 1; r <= ROUNDS; r++)); do
    rm -rf "$WORKDIR/db"
    # shellcheck disable=SC2086 # SERVE_FLAGS is split on purpose
    "$LAMINA" serve --dir "$WORKDIR/db" --port "$PORT" $SERVE_FLAGS >"$WORKDIR/serve.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q listening "$WORKDIR/serve.log" 2>/dev/null && break; sleep 0.1; done
    start=$(date +%s.%N)
    "$LAMINA" client --port "$PORT" <"$WORKDIR/workload.txt" >"$WORKDIR/replies.txt"
    end=$(date +%s.%N)
    kill -TERM "$server"
    wait "$server" || true
    awk -v r="$r" -v ops="$ops" -v s="$start" -v e="$end" \
        'BEGIN { printf "%d,%d,%.3f,%.0f\n", r, ops, e - s, ops / (e - s) }'
done
