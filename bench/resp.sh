#!/usr/bin/env bash
# redis-benchmark against lamina's Redis port and a real redis-server on
# this machine, in alternating rounds (each round runs every server once,
# the order rotated), then the median ops/s per server and test.
#
#   bench/resp.sh [REQUESTS] [ROUNDS]     # defaults: 1000000 and 3
#   KEYSPACE=1000000 bench/resp.sh        # random keys (redis-benchmark -r);
#                                         # without it every SET hits one key
#
# Servers (each started fresh on an empty directory, loopback, one
# redis-benchmark with 50 clients and 16 pipelined commands):
#   redis-memory      redis-server --save "" --appendonly no (no persistence)
#   redis-aof         redis-server --appendonly yes --appendfsync everysec
#   lamina-everysec   lamina serve --resp, --sync interval:1000 (fdatasync once a second, as everysec)
#   lamina-nosync     lamina serve --resp, --sync none (write() per group commit, the OS flushes)
# Needs the release build (cargo build --release -p lamina-cli) and
# redis-server / redis-benchmark (apt-get install redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-1000000}
rounds=${2:-3}
lamina=target/release/lamina
[ -x "$lamina" ] || { echo "build it first: cargo build --release -p lamina-cli" >&2; exit 1; }
scratch=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$scratch"
}
trap cleanup EXIT
# lamina's console reads stdin: an open, empty pipe keeps it waiting.
mkfifo "$scratch/stdin"
exec 3<> "$scratch/stdin"
port=6390
start() {
    local name=$1 dir=$scratch/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    case $name in
        redis-memory) redis-server --port $port --dir "$dir" --save "" --appendonly no --daemonize no > "$dir.log" 2>&1 & ;;
        redis-aof) redis-server --port $port --dir "$dir" --save "" --appendonly yes --appendfsync everysec --daemonize no > "$dir.log" 2>&1 & ;;
        lamina-everysec) "$lamina" serve --dir "$dir/db" --port 0 --resp $port --sync interval:1000 < "$scratch/stdin" > "$dir.log" 2>&1 & ;;
        lamina-nosync) "$lamina" serve --dir "$dir/db" --port 0 --resp $port --sync none < "$scratch/stdin" > "$dir.log" 2>&1 & ;;
    esac
    pid=$!
    for _ in $(seq 100); do
        redis-cli -p $port ping > /dev/null 2>&1 && return
        sleep 0.1
    done
    echo "$name did not start" >&2
    cat "$dir.log" >&2
    exit 1
}
stop() {
    # SIGTERM shuts either server down cleanly.
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
}
servers=(redis-memory redis-aof lamina-everysec lamina-nosync)
: > "$scratch/results"
for r in $(seq "$rounds"); do
    n=${#servers[@]}
    for i in $(seq 0 $((n - 1))); do
        s=${servers[$(((i + r) % n))]}
        start "$s"
        redis-benchmark -p $port -t set,get -n "$requests" -P 16 ${KEYSPACE:+-r "$KEYSPACE"} -q 2>&1 | tr '\r' '\n' |
            sed -n 's/^\(SET\|GET\): \([0-9.]*\) requests per second.*/\1 \2/p' |
            while read -r test ops; do echo "$s $test $ops $r"; done >> "$scratch/results"
        stop
    done
done
echo "| server | SET ops/s (median) | GET ops/s (median) | rounds |"
echo "|---|---:|---:|---:|"
for s in "${servers[@]}"; do
    med() { grep "^$s $1 " "$scratch/results" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    echo "| $s | $(med SET) | $(med GET) | $(grep -c "^$s SET " "$scratch/results") |"
done
