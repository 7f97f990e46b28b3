#!/usr/bin/env bash
# The Redis protocol port (`lamina serve --resp`) driven by the real
# redis-cli and redis-benchmark (Debian's redis-tools, installed if
# missing): start-up handshakes, every command kind, SCAN through
# redis-cli --scan, then a pipelined redis-benchmark run that must finish
# with no error. Prints redis-benchmark's ops/s.
#
#   scripts/redis-tools-test.sh [REQUESTS]    # default 100000
#
# Uses the debug build (the test suite has built it); LAMINA=path overrides.
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-100000}
if ! command -v redis-cli >/dev/null || ! command -v redis-benchmark >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null
fi
lamina=${LAMINA:-target/debug/lamina}
[ -x "$lamina" ] || cargo build -q -p lamina-cli --bin lamina
scratch=$(mktemp -d)
server=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$scratch"
}
trap cleanup EXIT
# The console reads stdin: keep it open (and empty) for the server's life.
mkfifo "$scratch/stdin"
"$lamina" serve --dir "$scratch/db" --port 0 --resp 0 --allow-flushall \
    < "$scratch/stdin" > "$scratch/out" 2> "$scratch/err" &
server=$!
exec 3> "$scratch/stdin"
for _ in $(seq 100); do
    grep -q "redis protocol on" "$scratch/out" 2>/dev/null && break
    sleep 0.1
done
port=$(sed -n 's/^lamina: redis protocol on .*:\([0-9]*\)$/\1/p' "$scratch/out")
[ -n "$port" ] || { cat "$scratch/err" >&2; echo "the server did not start" >&2; exit 1; }
cli() { redis-cli -p "$port" "$@"; }
expect() {
    local want=$1
    shift
    local got
    got=$(cli "$@")
    if [ "$got" != "$want" ]; then
        printf 'redis-cli %s: got %q, want %q\n' "$*" "$got" "$want" >&2
        exit 1
    fi
}
expect PONG ping
expect OK set greeting "hello world"
expect "hello world" get greeting
expect OK mset a 1 b 2 c 3
expect "$(printf '1\n2\n\n3')" mget a b missing c
expect 2 exists a b missing
expect 1 del a missing
expect 3 dbsize
expect "$(printf 'b\nc\ngreeting')" --scan
expect "$(printf 'b\nc')" --scan --pattern '[bc]'
expect "" set b 9 nx
expect 2 get b
expect "ERR unknown command 'frob', with args beginning with: 'x'" frob x
expect "ERR wrong number of arguments for 'get' command" get
expect OK flushall
expect 0 dbsize
# Counters; a transaction in one redis-cli session (queued, then applied
# at EXEC); INFO keyspace; RESP3 (redis-cli -3 says HELLO 3).
expect 5 incrby n 5
expect 4 decr n
got=$(printf 'MULTI\nSET t 1\nINCR t\nGET t\nEXEC\n' | cli)
[ "$got" = "$(printf 'OK\nQUEUED\nQUEUED\nQUEUED\nOK\n2\n2')" ] || { printf 'MULTI session: got %q\n' "$got" >&2; exit 1; }
got=$(printf 'MULTI\nSET t 9\nNOSUCH\nEXEC\nGET t\n' | cli 2>&1)
[ "$(echo "$got" | tail -1)" = 2 ] || { printf 'aborted MULTI applied: %q\n' "$got" >&2; exit 1; }
cli info keyspace | tr -d '\r' | grep -qx 'db0:keys=2,expires=0,avg_ttl=0' || { echo "INFO keyspace" >&2; exit 1; }
[ "$(cli -3 --no-raw get missing)" = "(nil)" ] || { echo "RESP3 null" >&2; exit 1; }
# redis-cli's HELP reads COMMAND DOCS: the summary is this server's.
cli help set | grep -q "lamina: no expiry options" || { cli help set >&2; echo "HELP from COMMAND DOCS" >&2; exit 1; }
expect OK flushall
# The README's redis-cli session, as a terminal shows it (--no-raw).
python3 - "$port" README.md <<'PY'
import shlex, subprocess, sys
port, readme = sys.argv[1], open(sys.argv[2]).read()
session = next(b for b in readme.split("```") if "$ redis-cli -p 6380" in b)
steps, want = [], None
for line in session.splitlines():
    if line.startswith("$ redis-cli -p 6380 "):
        want = []
        steps.append((shlex.split(line[len("$ redis-cli -p 6380 "):]), want))
    elif want is not None and not line.startswith("$ "):
        want.append(line)
assert steps, "no redis-cli lines in the README"
for args, want in steps:
    got = subprocess.run(["redis-cli", "--no-raw", "-p", port, *args], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    if got != want:
        sys.exit(f"README: redis-cli {' '.join(args)}: got {got}, want {want}")
print(f"README redis-cli session: {len(steps)} commands as shown")
PY
expect 0 dbsize
# Pipelined benchmark: SET then GET, 16 commands per round trip.
redis-benchmark -p "$port" -t set,get -n "$requests" -P 16 -q 2>&1 | tr '\r' '\n' |
    grep -E '^(SET|GET):.*requests per second' | tee "$scratch/bench"
[ "$(wc -l < "$scratch/bench")" -eq 2 ] || { echo "redis-benchmark did not finish both tests" >&2; exit 1; }
expect 1 dbsize   # redis-benchmark writes one key, key:__rand_int__
exec 3>&-
kill -TERM "$server"
wait "$server"
server=
"$lamina" verify "$scratch/db" > /dev/null
echo "redis-tools test: OK"
