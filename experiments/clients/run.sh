#!/usr/bin/env bash
# Seed 004, experiment 3: N concurrent clients split a workload of PUTS puts
# and GETS gets (1, 2, 4, 8 clients); prints throughput per client count.
# Usage: experiments/clients/run.sh [PUTS] [GETS]   (defaults: 4000000 each)
set -euo pipefail
cd "$(dirname "$0")/../.."
PUTS=${1:-4000000}
GETS=${2:-4000000}
PORT=${PORT:-7911}
WORK=${WORK:-/tmp/lamina-clients}
cargo build --release -q -p lamina-cli
L=target/release/lamina
rm -rf "$WORK" && mkdir -p "$WORK"
echo "clients,puts,gets,seconds,ops_per_sec"
for n in 1 2 4 8; do
  # Each client gets its own slice of the key space and its own seed, like
  # the seed's one-file-per-client setup (the generator front-loads nothing:
  # its operations are shuffled).
  span=$(( 2000000000 / n ))
  for i in $(seq 0 $((n - 1))); do
    $L gen --puts $((PUTS / n)) --gets $((GETS / n)) --gets-misses-ratio 0.5 --seed $((100 + i)) \
      --key-min $(( -1000000000 + i * span )) --key-max $(( -1000000000 + (i + 1) * span - 1 )) \
      > "$WORK/client-$n-$i.txt"
  done
  rm -rf "$WORK/db"
  $L serve --dir "$WORK/db" --port "$PORT" > "$WORK/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 50); do grep -q listening "$WORK/serve.log" 2>/dev/null && break; sleep 0.1; done
  start=$(date +%s.%N)
  pids=()
  for i in $(seq 0 $((n - 1))); do
    $L client --port "$PORT" --quiet < "$WORK/client-$n-$i.txt" > /dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s.%N)
  kill -TERM "$server"; wait "$server" || true
  secs=$(echo "$end - $start" | bc -l)
  printf '%d,%d,%d,%.2f,%.0f\n' "$n" "$PUTS" "$GETS" "$secs" "$(echo "($PUTS + $GETS) / $secs" | bc -l)"
done
