#!/usr/bin/env bash
# The kill loop, long version: `lamina serve --sync always` under CLIENTS
# concurrent clients (CS265 workloads, disjoint key ranges) is SIGKILLed
# ROUNDS times at random moments and restarted; every acknowledged write is
# checked after each restart, and the directory with `lamina verify` at the
# end. One fresh directory per compaction spec. LAMINA_KILL_SYNC=none (or
# interval:MS) runs the server with that sync mode instead of always.
#
#   scripts/kill-loop.sh [ROUNDS] [CLIENTS] [SPEC...]    (100 6 leveling)
#
# The harness is crates/lamina-cli/tests/kill_loop.rs (CI runs its short
# version).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-100}
clients=${2:-6}
shift 2 || shift $#
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(leveling)
for spec in "${specs[@]}"; do
    LAMINA_KILL_SYNC=${LAMINA_KILL_SYNC:-always} LAMINA_KILL_ROUNDS=$rounds LAMINA_KILL_CLIENTS=$clients LAMINA_KILL_COMPACTION=$spec \
        cargo test -q -p lamina-cli --test kill_loop -- --ignored --exact kill_loop_long \
        --nocapture 2>&1 | grep -E '^kill loop|panicked|FAILED|test result'
done
